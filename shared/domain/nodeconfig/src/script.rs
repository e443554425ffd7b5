//! The cloud-init boot script of a node.

use crate::{
    CONFIG_DIR, DATA_DIR, DATA_FILESYSTEM, DATA_VOLUME_DEVICE, HOME_DIR, NODE_NAME_VARIABLE,
    NodeGroupConfig, S3_CLIENT, ZONE_VARIABLE, elasticsearch_yml, jvm_options, package_arch,
};

/// How many times, two seconds apart, the boot script looks for the data
/// volume before it gives up: EC2 attaches a launch's volumes before the
/// instance boots, so this only covers a slow device probe.
const DATA_VOLUME_WAIT_TRIES: u32 = 150;

/// The part of the boot script that finds, formats (if blank) and mounts the
/// data volume; see [`user_data`], step 5. Plain shell, no Rust formatting:
/// it reads `DATA_DEVICE_NAME`, `DATA_FS`, `ES_DATA`, `AWS_REGION` and the
/// instance id, all set before it.
const DATA_VOLUME: &str = r#"# The data volume: the EBS volume EC2 attached at ${DATA_DEVICE_NAME}, found by
# its volume id, since the kernel's name for it differs between instance
# families: on Nitro an NVMe device numbered in probe order whose serial is the
# id (udev links it by that serial), on Xen a device named after the attachment.
volume=$(aws ec2 describe-instances --region "${AWS_REGION}" --instance-ids "${@NODE@}" \
  --query "Reservations[0].Instances[0].BlockDeviceMappings[?DeviceName=='${DATA_DEVICE_NAME}'].Ebs.VolumeId | [0]" \
  --output text)
if [[ ! "${volume}" =~ ^vol-[0-9a-f]+$ ]]; then
  echo "no EBS volume is attached at ${DATA_DEVICE_NAME} (EC2 says '${volume}')" >&2
  exit 1
fi
data_device() {
  local serial="${volume//-/}" dev
  dev="/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_${serial}"
  if [ -b "${dev}" ]; then
    readlink -f "${dev}"
    return 0
  fi
  for dev in /sys/block/nvme*; do
    if [ -r "${dev}/device/serial" ] \
      && [ "$(tr -d '[:space:]' <"${dev}/device/serial")" = "${serial}" ]; then
      echo "/dev/${dev##*/}"
      return 0
    fi
  done
  # Xen: no NVMe device at all, and the attachment names the device.
  if ! compgen -G '/sys/block/nvme*' >/dev/null; then
    for dev in "${DATA_DEVICE_NAME}" "/dev/xvd${DATA_DEVICE_NAME#/dev/sd}"; do
      if [ -b "${dev}" ]; then
        readlink -f "${dev}"
        return 0
      fi
    done
  fi
  return 1
}
data_dev=
for _ in $(seq 1 @TRIES@); do
  if data_dev=$(data_device); then
    break
  fi
  sleep 2
done
if [ -z "${data_dev}" ]; then
  echo "the data volume ${volume} did not appear as a block device" >&2
  exit 1
fi
if lsblk -nro MOUNTPOINT "${data_dev}" | grep -v '^$' | grep -qvxF "${ES_DATA}"; then
  echo "${data_dev} (${volume}) is mounted elsewhere; not touching it" >&2
  exit 1
fi
# Formatted only when blank: no signature blkid knows (exit 2) and a first
# MiB of zeros, as a new EBS volume reads. A filesystem, a partition table or
# anything unreadable is never formatted.
probe=0
blkid -p "${data_dev}" >/dev/null 2>&1 || probe=$?
if [ "${probe}" -eq 2 ] && [ -z "$(head -c 1048576 "${data_dev}" | tr -d '\0')" ]; then
  echo "formatting the blank data volume ${volume} (${data_dev}) as ${DATA_FS}"
  command -v "mkfs.${DATA_FS}" >/dev/null || dnf install -y -q e2fsprogs
  # No blocks reserved for root: Elasticsearch's disk watermarks and the
  # frozen tier's shared cache are shares of the whole volume.
  "mkfs.${DATA_FS}" -q -m 0 -E nodiscard -L floe-data "${data_dev}"
elif [ "${probe}" -ne 0 ]; then
  echo "${data_dev} (${volume}) is not blank but holds no known signature; not formatting it" >&2
  exit 1
fi
fstype=$(blkid -p -s TYPE -o value "${data_dev}")
uuid=$(blkid -p -s UUID -o value "${data_dev}")
if [[ ! "${fstype}" =~ ^(ext4|xfs)$ ]] || [[ ! "${uuid}" =~ ^[0-9a-fA-F-]+$ ]]; then
  echo "${data_dev} (${volume}) holds '${fstype}', not an ext4 or xfs filesystem" >&2
  exit 1
fi
# Mounted by UUID at every boot; nofail keeps a node whose volume is missing
# reachable, and the service's RequiresMountsFor keeps Elasticsearch off the
# root disk then.
entry="UUID=${uuid} ${ES_DATA} ${fstype} defaults,noatime,nofail 0 2"
if ! grep -qxF "${entry}" /etc/fstab; then
  {
    grep -vE "^[^#[:space:]]+[[:space:]]+${ES_DATA}[[:space:]]" /etc/fstab || true
    echo "${entry}"
  } >"${work}/fstab"
  cat "${work}/fstab" >/etc/fstab
fi
systemctl daemon-reload
mkdir -p "${ES_DATA}"
if [ "$(mountpoint -d "${ES_DATA}" 2>/dev/null || true)" != "$(mountpoint -x "${data_dev}")" ]; then
  mount "${ES_DATA}"
fi
if [ "$(mountpoint -d "${ES_DATA}")" != "$(mountpoint -x "${data_dev}")" ]; then
  echo "${ES_DATA} is not the data volume ${volume}" >&2
  exit 1
fi
chown elasticsearch:elasticsearch "${ES_DATA}"
chmod 2750 "${ES_DATA}"
"#;

/// A shell word that the shell takes literally, whatever `s` holds.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Appends a command writing `content` to `path` through a quoted here
/// document: the shell expands nothing in it (a `$` in a user value stays a
/// `$`), and the delimiter is chosen so that no line of `content` ends it.
fn write_file(out: &mut String, path: &str, content: &str) {
    let mut delimiter = String::from("FLOE_EOF");
    while content.lines().any(|l| l == delimiter) {
        delimiter.push('_');
    }
    out.push_str(&format!("cat > {path} <<'{delimiter}'\n{content}"));
    if !content.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&delimiter);
    out.push('\n');
}

/// The boot script (cloud-init user data, run once as root) of one node of
/// the group, for Amazon Linux 2023 (RPM, systemd, AWS CLI v2):
///
/// 1. system settings Elastic requires or recommends: `vm.max_map_count`,
///    `vm.swappiness=1`, `net.ipv4.tcp_retries2=5` (a sysctl.d file);
/// 2. the instance id (and, before 8.2, the zone) from the instance
///    metadata service with an IMDSv2 token;
/// 3. Elastic's RPM for the version and architecture (`aarch64` on Graviton,
///    `x86_64` otherwise), checked against its published SHA-512;
/// 4. the `discovery-ec2` plugin, and `repository-s3` before 8.0 (from 8.0
///    it is built in);
/// 5. the data volume (attached at [`DATA_VOLUME_DEVICE`]): EC2 names its
///    volume id (`ec2:DescribeInstances`, which the discovery plugin needs
///    too), the script waits for the block device with that id (NVMe serial,
///    or the attachment's name on Xen), formats it as [`DATA_FILESYSTEM`]
///    only when it is blank, and mounts it at `path.data` ([`DATA_DIR`]) by
///    UUID from `/etc/fstab` (`nofail`), owned by elasticsearch;
/// 6. the deployment's CA, node certificate and key (`{parameter_prefix}/tls/…`)
///    into `config/certs/` (0640, group elasticsearch), and the elastic
///    user's password (`security/elastic_password`) into the keystore as
///    `bootstrap.password`, after removing what the package's security
///    auto-configuration left there;
/// 7. the repository credentials, read from SSM Parameter Store
///    (`{parameter_prefix}/repository/access_key`, `secret_key`,
///    `session_token`) and piped into the keystore, so they are never in the
///    user data, a file, a command line or the console log;
/// 8. `elasticsearch.yml` and `jvm.options.d/floe.options`;
/// 9. on master-eligible nodes, `cluster.initial_master_nodes` when
///    `{parameter_prefix}/initial_master_nodes` exists: the plan that creates
///    a cluster stores there the comma-separated instance ids of its first
///    master-eligible nodes right after launching them (a booting node reads
///    it minutes later, after the download) and deletes it once the cluster
///    has formed; a node that finds none joins the existing cluster;
/// 10. systemd drop-ins: `LimitMEMLOCK=infinity` (for
///     `bootstrap.memory_lock`), `RequiresMountsFor` the data volume and the
///     node's name; then it enables and starts Elasticsearch.
///
/// Re-running the script after a failure resumes: the package and plugins
/// are installed only if missing, a data volume that holds a filesystem is
/// mounted as it is, everything else is overwritten.
pub fn user_data(c: &NodeGroupConfig) -> String {
    let mut s = String::new();
    s.push_str(
        "#!/bin/bash\n\
         # Boot script of an Elasticsearch node, rendered by Floe. It holds no\n\
         # secret: the repository credentials are read from SSM at boot.\n\
         set -euo pipefail\n\n",
    );
    s.push_str(&format!("ES_VERSION={}\n", sh(c.es_version)));
    s.push_str(&format!("ES_ARCH={}\n", sh(package_arch(c.instance.arch))));
    s.push_str(&format!("AWS_REGION={}\n", sh(c.region)));
    s.push_str(&format!("ES_HOME={}\n", sh(HOME_DIR)));
    s.push_str(&format!("ES_CONF={}\n", sh(CONFIG_DIR)));
    s.push_str(&format!("ES_DATA={}\n", sh(DATA_DIR)));
    s.push_str(&format!("DATA_DEVICE_NAME={}\n", sh(DATA_VOLUME_DEVICE)));
    s.push_str(&format!("DATA_FS={}\n", sh(DATA_FILESYSTEM)));
    s.push_str("work=$(mktemp -d)\ntrap 'rm -rf \"${work}\"' EXIT\n\n");

    s.push_str(
        "# Elastic's system configuration: enough memory maps for Lucene, swap\n\
         # only in an emergency, and a dead peer noticed in seconds, not minutes.\n",
    );
    write_file(
        &mut s,
        "/etc/sysctl.d/90-elasticsearch.conf",
        "vm.max_map_count=262144\nvm.swappiness=1\nnet.ipv4.tcp_retries2=5\n",
    );
    s.push_str("sysctl --system >/dev/null\n\n");

    s.push_str(
        "# IMDSv2: a session token first, then the metadata.\n\
         imds_token=$(curl -fsS --retry 5 -X PUT -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' \\\n  \
         http://169.254.169.254/latest/api/token)\n\
         imds() {\n  \
         curl -fsS --retry 5 -H \"X-aws-ec2-metadata-token: ${imds_token}\" \\\n    \
         \"http://169.254.169.254/latest/meta-data/$1\"\n\
         }\n",
    );
    s.push_str(&format!(
        "{NODE_NAME_VARIABLE}=$(imds instance-id)\nexport {NODE_NAME_VARIABLE}\n"
    ));
    if !c.plugin_reads_imdsv2() {
        s.push_str(&format!(
            "# This version's EC2 plugin cannot use IMDSv2: the zone comes from here.\n\
             {ZONE_VARIABLE}=$(imds placement/availability-zone)\nexport {ZONE_VARIABLE}\n"
        ));
    }
    s.push('\n');

    s.push_str(
        "if ! rpm -q elasticsearch >/dev/null 2>&1; then\n  \
         package=\"elasticsearch-${ES_VERSION}-${ES_ARCH}.rpm\"\n  \
         url=\"https://artifacts.elastic.co/downloads/elasticsearch/${package}\"\n  \
         curl -fsSL --retry 5 -o \"${work}/${package}\" \"${url}\"\n  \
         curl -fsSL --retry 5 -o \"${work}/${package}.sha512\" \"${url}.sha512\"\n  \
         (cd \"${work}\" && sha512sum --check --quiet \"${package}.sha512\")\n  \
         # From 8.0 the package prints a generated password for the elastic\n  \
         # user; it must not reach the console log.\n  \
         rpm --install --quiet \"${work}/${package}\" >/dev/null\n\
         fi\n\n",
    );

    s.push_str(
        "install_plugin() {\n  \
         if [ ! -d \"${ES_HOME}/plugins/$1\" ]; then\n    \
         \"${ES_HOME}/bin/elasticsearch-plugin\" install --batch \"$1\"\n  \
         fi\n\
         }\n\
         install_plugin discovery-ec2\n",
    );
    if c.needs_repository_s3_plugin() {
        s.push_str("install_plugin repository-s3\n");
    }
    s.push('\n');

    s.push_str(
        &DATA_VOLUME
            .replace("@NODE@", NODE_NAME_VARIABLE)
            .replace("@TRIES@", &DATA_VOLUME_WAIT_TRIES.to_string()),
    );
    s.push('\n');

    s.push_str(
        "# The deployment's certificates (its own CA, shared by every node) and\n\
         # the elastic user's password, from SSM. The package's auto-configuration\n\
         # (8.x) made a CA of this node alone: its keystore entries go.\n\
         for auto in xpack.security.transport.ssl.keystore.secure_password \\\n  \
         xpack.security.transport.ssl.truststore.secure_password \\\n  \
         xpack.security.http.ssl.keystore.secure_password autoconfiguration.password_hash; do\n  \
         \"${ES_HOME}/bin/elasticsearch-keystore\" remove \"${auto}\" >/dev/null 2>&1 || true\n\
         done\n\
         install -d -m 0750 -o root -g elasticsearch \"${ES_CONF}/certs\"\n\
         ssm_value() {\n  \
         aws ssm get-parameter --region \"${AWS_REGION}\" --with-decryption --name \"$1\" \\\n    \
         --query Parameter.Value --output text\n\
         }\n",
    );
    for (parameter, file) in [
        ("tls/ca.crt", "ca.crt"),
        ("tls/node.crt", "node.crt"),
        ("tls/node.key", "node.key"),
    ] {
        s.push_str(&format!(
            "(umask 0027 && ssm_value {} >\"${{ES_CONF}}/certs/{file}\")\n",
            sh(&c.parameter(parameter)),
        ));
    }
    // The endpoint, named by the shared certificate already unless the
    // deployment got it after its create.
    let endpoint_san = c
        .endpoint
        .map(|host| match host.parse::<std::net::IpAddr>() {
            Ok(_) => format!("IP:{host}"),
            Err(_) => format!("DNS:{host}"),
        })
        .unwrap_or_default();
    s.push_str(&format!(
        "# HTTP: a certificate of this node's own, naming its address and the\n\
         # endpoint too (for clients that sniff _nodes/http), signed with the key\n\
         # of the deployment's CA, or of its HTTP CA when it has one (moved to an\n\
         # endpoint after a create that kept no CA key); without a key (an older\n\
         # deployment), the shared certificate.\n\
         certs=\"${{ES_CONF}}/certs\"\n\
         if (umask 0077 && ssm_value {ca_key} >\"${{certs}}/ca.key\") 2>/dev/null; then\n  \
         (umask 0027 && ssm_value {http_ca} >\"${{certs}}/http-ca.crt\") 2>/dev/null \\\n    \
         || cp \"${{certs}}/ca.crt\" \"${{certs}}/http-ca.crt\"\n  \
         node_ip=$(imds local-ipv4)\n  \
         sans=$(openssl x509 -in \"${{certs}}/node.crt\" -noout -ext subjectAltName | tail -n +2 | sed -e 's/IP Address:/IP:/g' -e 's/ //g')\n  \
         endpoint_san={endpoint_san}\n  \
         if [ -n \"${{endpoint_san}}\" ]; then\n    \
         case \",${{sans}},\" in *\",${{endpoint_san}},\"*) ;; *) sans=\"${{sans}},${{endpoint_san}}\" ;; esac\n  \
         fi\n  \
         (umask 0027 && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \\\n    \
         -keyout \"${{certs}}/http.key\" -subj {subject} -out \"${{certs}}/http.csr\" 2>/dev/null)\n  \
         printf 'subjectAltName=%s,IP:%s\\nextendedKeyUsage=serverAuth\\nkeyUsage=digitalSignature,keyAgreement\\nbasicConstraints=CA:FALSE\\n' \\\n    \
         \"${{sans}}\" \"${{node_ip}}\" >\"${{certs}}/http.ext\"\n  \
         openssl x509 -req -in \"${{certs}}/http.csr\" -CA \"${{certs}}/http-ca.crt\" -CAkey \"${{certs}}/ca.key\" \\\n    \
         -set_serial \"0x$(openssl rand -hex 16)\" -days 36500 -extfile \"${{certs}}/http.ext\" \\\n    \
         -out \"${{certs}}/http.crt\" 2>/dev/null\n  \
         rm -f \"${{certs}}/ca.key\" \"${{certs}}/http.csr\" \"${{certs}}/http.ext\"\n\
         else\n  \
         rm -f \"${{certs}}/ca.key\"\n  \
         cp \"${{certs}}/node.crt\" \"${{certs}}/http.crt\"\n  \
         cp \"${{certs}}/node.key\" \"${{certs}}/http.key\"\n\
         fi\n",
        ca_key = sh(&c.parameter("tls/ca.key")),
        http_ca = sh(&c.parameter("tls/http-ca.crt")),
        endpoint_san = sh(&endpoint_san),
        subject = sh(&format!("/CN={}", floe_domain::access::server_name(c.deployment_id))),
    ));
    s.push_str(&format!(
        "chown root:elasticsearch \"${{ES_CONF}}\"/certs/*\n\
         chmod 0640 \"${{ES_CONF}}\"/certs/*\n\
         ssm_value {} | \"${{ES_HOME}}/bin/elasticsearch-keystore\" add --stdin --force bootstrap.password\n\
         chown root:elasticsearch \"${{ES_CONF}}/elasticsearch.keystore\"\n\
         chmod 0660 \"${{ES_CONF}}/elasticsearch.keystore\"\n\n",
        sh(&c.parameter("security/elastic_password")),
    ));

    if let Some(r) = c.repository.filter(|r| r.has_credentials) {
        s.push_str("# The repository's credentials go from SSM straight into the keystore.\n");
        let mut secrets = vec!["access_key", "secret_key"];
        if r.has_session_token {
            secrets.push("session_token");
        }
        for secret in secrets {
            s.push_str(&format!(
                "aws ssm get-parameter --region \"${{AWS_REGION}}\" --with-decryption \\\n  \
                 --name {} \\\n  \
                 --query Parameter.Value --output text \\\n  \
                 | \"${{ES_HOME}}/bin/elasticsearch-keystore\" add --stdin --force s3.client.{S3_CLIENT}.{secret}\n",
                sh(&c.parameter(&format!("repository/{secret}"))),
            ));
        }
        // The keystore tool rewrites the file as root; the node reads it as
        // the elasticsearch group.
        s.push_str(
            "chown root:elasticsearch \"${ES_CONF}/elasticsearch.keystore\"\n\
             chmod 0660 \"${ES_CONF}/elasticsearch.keystore\"\n\n",
        );
    }

    write_file(
        &mut s,
        "\"${ES_CONF}/elasticsearch.yml\"",
        &elasticsearch_yml(c),
    );
    s.push_str("mkdir -p \"${ES_CONF}/jvm.options.d\"\n");
    write_file(
        &mut s,
        "\"${ES_CONF}/jvm.options.d/floe.options\"",
        &jvm_options(c),
    );
    s.push('\n');

    if c.master_eligible() {
        s.push_str(&format!(
            "# A new cluster forms once its first master-eligible nodes know each\n\
             # other; the plan that creates it stores their instance ids here.\n\
             ids='^i-[0-9a-zA-Z]+(,i-[0-9a-zA-Z]+)*$'\n\
             if masters=$(aws ssm get-parameter --region \"${{AWS_REGION}}\" \\\n    \
             --name {} \\\n    \
             --query Parameter.Value --output text 2>\"${{work}}/ssm-error\"); then\n  \
             if [[ ! \"${{masters}}\" =~ ${{ids}} ]]; then\n    \
             echo \"initial_master_nodes is not a list of instance ids\" >&2\n    \
             exit 1\n  \
             fi\n  \
             printf 'cluster.initial_master_nodes: [%s]\\n' \"${{masters//,/, }}\" \\\n    \
             >>\"${{ES_CONF}}/elasticsearch.yml\"\n\
             elif ! grep -q ParameterNotFound \"${{work}}/ssm-error\"; then\n  \
             cat \"${{work}}/ssm-error\" >&2\n  \
             exit 1\n\
             fi\n",
            sh(&c.parameter("initial_master_nodes")),
        ));
    }
    s.push_str(
        "chown root:elasticsearch \"${ES_CONF}/elasticsearch.yml\" \"${ES_CONF}/jvm.options.d/floe.options\"\n\
         chmod 0660 \"${ES_CONF}/elasticsearch.yml\" \"${ES_CONF}/jvm.options.d/floe.options\"\n\n",
    );

    s.push_str(
        "# Memory lock needs an unlimited locked-memory limit for the service, and\n\
         # the node name (and zone) reach elasticsearch.yml through its environment.\n\
         dropins=/etc/systemd/system/elasticsearch.service.d\n\
         mkdir -p \"${dropins}\"\n",
    );
    write_file(
        &mut s,
        "\"${dropins}/floe-memlock.conf\"",
        "[Service]\nLimitMEMLOCK=infinity\n",
    );
    write_file(
        &mut s,
        "\"${dropins}/floe-data.conf\"",
        &format!("[Unit]\nRequiresMountsFor={DATA_DIR}\n"),
    );
    s.push_str(&format!(
        "printf '[Service]\\nEnvironment=%s=%s\\n' {NODE_NAME_VARIABLE} \"${{{NODE_NAME_VARIABLE}}}\" \\\n  \
         >\"${{dropins}}/floe-node.conf\"\n"
    ));
    if !c.plugin_reads_imdsv2() {
        s.push_str(&format!(
            "printf 'Environment=%s=%s\\n' {ZONE_VARIABLE} \"${{{ZONE_VARIABLE}}}\" \\\n  \
             >>\"${{dropins}}/floe-node.conf\"\n"
        ));
    }
    s.push_str(
        "systemctl daemon-reload\n\
         systemctl enable elasticsearch.service\n\
         systemctl start elasticsearch.service\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_literal() {
        assert_eq!(sh("abc"), "'abc'");
        assert_eq!(sh("it's"), "'it'\\''s'");
        assert_eq!(sh("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(sh(""), "''");
    }

    #[test]
    fn heredoc_delimiter_never_occurs_as_a_line() {
        let mut out = String::new();
        write_file(&mut out, "/f", "a\nFLOE_EOF\nFLOE_EOF_\nb");
        assert!(out.starts_with("cat > /f <<'FLOE_EOF__'\n"), "{out}");
        assert!(out.ends_with("\nb\nFLOE_EOF__\n"), "{out}");
        let mut out = String::new();
        write_file(&mut out, "/f", "x\n");
        assert_eq!(out, "cat > /f <<'FLOE_EOF'\nx\nFLOE_EOF\n");
    }
}
