# A repository on an S3-compatible store, a snapshot policy, and a Graviton
# deployment that uses both: what an operator keeps in Floe, as code.
#
#   export FLOE_API_URL=http://127.0.0.1:8080    # or the stack's API URL
#   export FLOE_API_KEY=...                       # floe auth key create --description terraform
#   . .floe/s3.env                                # local mode's S3 store
#   terraform apply -var s3_endpoint=$S3_ENDPOINT -var s3_bucket=$S3_BUCKET \
#     -var s3_access_key=$S3_ACCESS_KEY -var s3_secret_key=$S3_SECRET_KEY
#
# docs/terraform/provider.md explains the provider; the test suite applies
# this configuration as it is written here (tests/tests/terraform.rs).

terraform {
  required_providers {
    floe = {
      source = "floe/floe"
    }
  }
}

# Endpoint and key from FLOE_API_URL and FLOE_API_KEY.
provider "floe" {}

variable "s3_endpoint" {
  type        = string
  description = "host:port of the S3-compatible store."
}

variable "s3_bucket" {
  type = string
}

variable "s3_access_key" {
  type = string
}

variable "s3_secret_key" {
  type      = string
  sensitive = true
}

variable "node_count" {
  type    = number
  default = 3
}

# false keeps the deployment's snapshots when it is destroyed (a final
# snapshot, then delete): the repository then stays in use by them. Apply
# with true before a destroy that should leave nothing behind.
variable "remove_snapshots_on_destroy" {
  type    = bool
  default = false
}

# The Graviton types of the platform's catalog.
data "floe_instance_types" "graviton" {
  arch = "arm64"
}

resource "floe_snapshot_repository" "main" {
  name                       = "main-backups"
  bucket                     = var.s3_bucket
  endpoint                   = var.s3_endpoint
  protocol                   = "http"
  path_style_access          = true
  access_key                 = var.s3_access_key
  secret_key                 = var.s3_secret_key
  max_snapshot_bytes_per_sec = "150mb"
  max_restore_bytes_per_sec  = "1gb"
}

resource "floe_snapshot_policy" "every_30_minutes" {
  name          = "every-30-minutes"
  snapshot_name = "<floe-{now/d}-{now{HHmm}}>"
  repository    = floe_snapshot_repository.main.name

  schedule {
    interval = "30m"
  }

  retention {
    expire_after = "7d"
    min_count    = 5
    max_count    = 100
  }
}

resource "floe_deployment" "logs" {
  name    = "logs-prod"
  version = "8.15.3"

  node_group {
    id            = "hot"
    roles         = ["master", "data_hot", "data_content", "ingest"]
    instance_type = "m6g.xlarge"
    count         = var.node_count
    zone_count    = 3

    storage {
      size_gb = 200
    }
  }

  user_settings_json = jsonencode({
    "thread_pool.snapshot.max" = 8
  })

  snapshot_repository = floe_snapshot_repository.main.name
  snapshot_policies   = [floe_snapshot_policy.every_30_minutes.id]

  tags = {
    team = "search"
    env  = "prod"
  }

  remove_snapshots_on_destroy = var.remove_snapshots_on_destroy
}

output "deployment_id" {
  value = floe_deployment.logs.id
}

output "endpoint" {
  value = floe_deployment.logs.endpoint
}

output "arch" {
  value = floe_deployment.logs.node_group[0].arch
}

output "graviton_types" {
  value = length(data.floe_instance_types.graviton.names)
}

output "elastic_password" {
  value     = floe_deployment.logs.password
  sensitive = true
}
