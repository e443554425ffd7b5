//! Which `elasticsearch.yml` keys a deployment's `user_settings` may hold.
//!
//! An allowlist, not a denylist (issue 33): Elasticsearch has hundreds of
//! node settings and each release adds more, and a single one can turn
//! security off in effect (`xpack.security.authc.anonymous.roles`), let the
//! cluster reach any host (`reindex.remote.whitelist`), or point it at files
//! outside its data. A key is accepted only when it matches a pattern below
//! that was chosen because it tunes the tenant's own cluster and nothing
//! else. `docs/user-settings.md` lists the same groups for users.
//!
//! Keys the platform renders itself are refused first, with their own code,
//! so a user learns that the key exists but is the platform's.

/// Settings the platform renders itself; a user value would break the
/// cluster's wiring (paths, discovery, identity) or leak around the
/// repository's own credentials. An entry ending in `.` owns that key and
/// everything under it; one ending in `*` owns every key that starts with
/// what precedes the `*`; any other entry owns that key and its sub-keys.
pub const PLATFORM_OWNED_SETTINGS: &[&str] = &[
    "path.",
    "cluster.name",
    "cluster.initial_master_nodes",
    "node.name",
    "node.roles",
    // `node.attr.floe_node_group` and any attribute the platform may add
    // under its own prefix: plans and awareness find nodes by them.
    "node.attr.floe*",
    // The zone attribute awareness balances on (nodeconfig's
    // ZONE_ATTRIBUTE); a user value would put every node in one zone.
    "node.attr.aws_availability_zone",
    "discovery.",
    "network.",
    "http.port",
    "http.host",
    "transport.port",
    "transport.host",
    "bootstrap.memory_lock",
    "s3.client.",
    "xpack.security.enabled",
    "xpack.security.transport.",
    "xpack.security.http.ssl.",
    "xpack.searchable.snapshot.shared_cache.size",
];

/// The keys a deployment may set. A pattern is dotted segments where `*`
/// stands for exactly one segment and a final `**` for one or more.
///
/// Every group tunes only the tenant's own cluster: how much memory, how
/// many threads, how shards are placed among its own nodes, what its own
/// users may do. None opens a path to another host, a file, a network
/// interface, a repository or the security configuration.
pub const ALLOWED_USER_SETTINGS: &[&str] = &[
    // Thread pools: sizes and queues of the node's own executors. Whole
    // numbers are checked on the value (see the deployment's validation).
    "thread_pool.*.size",
    "thread_pool.*.queue_size",
    "thread_pool.*.max",
    "thread_pool.*.core",
    "thread_pool.*.keep_alive",
    // Heap shares of indexing buffers and caches: memory of the node itself.
    "indices.memory.index_buffer_size",
    "indices.memory.min_index_buffer_size",
    "indices.memory.max_index_buffer_size",
    "indices.queries.cache.size",
    "indices.fielddata.cache.size",
    "indices.requests.cache.size",
    "indices.requests.cache.expire",
    // Circuit breakers: limits that protect the node's heap.
    "indices.breaker.total.limit",
    "indices.breaker.total.use_real_memory",
    "indices.breaker.*.limit",
    "indices.breaker.*.overhead",
    // Recovery throttles between the cluster's own nodes. Not
    // `indices.recovery.use_snapshots`: that reads the platform's repository
    // outside the snapshot lifecycle the platform drives.
    "indices.recovery.max_bytes_per_sec",
    "indices.recovery.max_concurrent_file_chunks",
    "indices.recovery.max_concurrent_operations",
    // Search limits and defaults: what the cluster's own queries may cost.
    "search.max_buckets",
    "search.default_search_timeout",
    "search.default_allow_partial_results",
    "search.allow_expensive_queries",
    "search.max_keep_alive",
    "search.default_keep_alive",
    "search.low_level_cancellation",
    "indices.id_field_data.enabled",
    // What the cluster's own users may do to its indices.
    "action.auto_create_index",
    "action.destructive_requires_name",
    "action.search.shard_count.limit",
    "cluster.indices.close.enable",
    "cluster.max_shards_per_node",
    "cluster.max_shards_per_node.frozen",
    // Shard placement among the deployment's own nodes. Allocation
    // filtering (`cluster.routing.allocation.include/exclude/require.*`)
    // is not here: plans drain nodes with it, and a user filter could keep
    // shards on a node being replaced. Awareness attributes are a platform
    // default a user may replace (nodeconfig lets it be overridden).
    "cluster.routing.allocation.enable",
    "cluster.routing.rebalance.enable",
    "cluster.routing.allocation.allow_rebalance",
    "cluster.routing.allocation.cluster_concurrent_rebalance",
    "cluster.routing.allocation.node_concurrent_recoveries",
    "cluster.routing.allocation.node_concurrent_incoming_recoveries",
    "cluster.routing.allocation.node_concurrent_outgoing_recoveries",
    "cluster.routing.allocation.node_initial_primaries_recoveries",
    "cluster.routing.allocation.same_shard.host",
    "cluster.routing.allocation.total_shards_per_node",
    "cluster.routing.allocation.balance.*",
    "cluster.routing.allocation.disk.threshold_enabled",
    "cluster.routing.allocation.disk.watermark.**",
    "cluster.routing.allocation.awareness.attributes",
    "cluster.routing.allocation.awareness.force.*.values",
    // HTTP request limits. Not the port, host, bind or publish addresses
    // (platform-owned network wiring), and not CORS, which would let other
    // sites' pages call the cluster from a user's browser.
    "http.max_content_length",
    "http.max_initial_line_length",
    "http.max_header_size",
    "http.compression",
    "http.compression_level",
    // Ingest: turning the GeoIP downloader off, and its cache. Not its
    // endpoint, which would make nodes fetch from any host.
    "ingest.geoip.downloader.enabled",
    "ingest.geoip.cache_size",
    // Machine learning limits on the deployment's own nodes.
    "xpack.ml.enabled",
    "xpack.ml.max_machine_memory_percent",
    "xpack.ml.use_auto_machine_memory_percent",
    "xpack.ml.max_model_memory_limit",
    "xpack.ml.max_lazy_ml_nodes",
    "xpack.ml.max_ml_node_size",
    "xpack.ml.max_anomaly_records",
    "xpack.ml.max_inference_processors",
    "xpack.ml.node_concurrent_job_allocations",
    "xpack.ml.nightly_maintenance_requests_per_second",
    "xpack.ml.inference_model.cache_size",
    "xpack.ml.inference_model.time_to_live",
    // Scripting: which scripts run and how often they compile; they run
    // inside Elasticsearch's sandbox whatever these say.
    "script.allowed_types",
    "script.allowed_contexts",
    "script.max_compilations_rate",
    "script.cache.max_size",
    "script.cache.expire",
    "script.max_size_in_bytes",
    "script.painless.regex.enabled",
    "script.painless.regex.limit-factor",
    // Log levels. Appenders and files are configured in log4j2.properties,
    // which users cannot touch, so a level reaches no file of its own.
    "logger.**",
    // Custom node attributes, for the user's own allocation awareness and
    // filtering. The platform's own attributes are refused above.
    "node.attr.**",
    // Index lifecycle timing on the cluster's own indices.
    "indices.lifecycle.poll_interval",
    "indices.lifecycle.history_index_enabled",
    "indices.lifecycle.rollover.only_if_has_documents",
    // How many snapshot operations may run at once; where snapshots go is
    // the platform's repository.
    "snapshot.max_concurrent_operations",
];

/// Why a key cannot be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The platform renders this key itself; the entry that owns it.
    PlatformOwned(&'static str),
    /// No pattern of [`ALLOWED_USER_SETTINGS`] matches it.
    NotAllowed,
}

/// Whether a deployment may set `key` (already checked to be a dotted name).
pub fn check_key(key: &str) -> Result<(), Refusal> {
    if let Some(owned) = owned_by_platform(key) {
        return Err(Refusal::PlatformOwned(owned));
    }
    if ALLOWED_USER_SETTINGS.iter().any(|p| matches(p, key)) {
        Ok(())
    } else {
        Err(Refusal::NotAllowed)
    }
}

fn owned_by_platform(key: &str) -> Option<&'static str> {
    PLATFORM_OWNED_SETTINGS.iter().copied().find(|owned| {
        if let Some(prefix) = owned.strip_suffix('*') {
            key.starts_with(prefix)
        } else if let Some(prefix) = owned.strip_suffix('.') {
            key == prefix || key.starts_with(owned)
        } else {
            key == *owned || key.starts_with(&format!("{owned}."))
        }
    })
}

fn matches(pattern: &str, key: &str) -> bool {
    let mut pattern = pattern.split('.');
    let mut key = key.split('.');
    loop {
        match (pattern.next(), key.next()) {
            // `**` takes the segment just read and all that follow.
            (Some("**"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(p), Some(k)) if p == k => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys refused, each with why: the reason is the test's documentation
    /// of the allowlist's purpose (issue 33).
    const REFUSED: &[(&str, &str)] = &[
        // Security off in effect.
        (
            "xpack.security.authc.anonymous.roles",
            "security off: anonymous users get any role, superuser included",
        ),
        (
            "xpack.security.authc.realms.ldap.ldap1.url",
            "security off and SSRF: a realm the user controls authenticates everyone",
        ),
        (
            "xpack.security.authc.token.enabled",
            "security: how the cluster issues credentials",
        ),
        (
            "xpack.security.audit.enabled",
            "security: the audit trail is the platform's to keep",
        ),
        (
            "xpack.security.enabled",
            "platform-owned: security is always on",
        ),
        (
            "xpack.security.http.ssl.enabled",
            "platform-owned: the functions reach nodes over TLS",
        ),
        (
            "xpack.security.transport.ssl.verification_mode",
            "platform-owned: nodes prove they belong to the deployment",
        ),
        // SSRF / remote reach.
        (
            "reindex.remote.whitelist",
            "SSRF: reindex from any host the nodes can reach",
        ),
        (
            "reindex.ssl.verification_mode",
            "remote reach: weakens reindex-from-remote TLS",
        ),
        (
            "xpack.http.whitelist",
            "SSRF: Watcher's HTTP client reaches any host",
        ),
        ("xpack.http.proxy.host", "SSRF: routes Watcher's requests"),
        (
            "xpack.monitoring.exporters.ex1.host",
            "SSRF: ships monitoring data to any host",
        ),
        (
            "xpack.notification.webhook.additional_token_enabled",
            "remote reach: Watcher notifications to outside hosts",
        ),
        (
            "ingest.geoip.downloader.endpoint",
            "SSRF: nodes download databases from any host",
        ),
        (
            "cluster.remote.other.seeds",
            "remote reach: connects to another cluster, perhaps another tenant's",
        ),
        (
            "xpack.ml.process_connect_timeout",
            "not a limit; only the listed ML limits are allowed",
        ),
        (
            "http.cors.allow-origin",
            "other sites' pages could call the cluster from a browser",
        ),
        (
            "http.cors.enabled",
            "other sites' pages could call the cluster from a browser",
        ),
        // Filesystem paths.
        (
            "path.repo",
            "platform-owned filesystem path: an fs repository anywhere",
        ),
        ("path.data", "platform-owned filesystem path"),
        ("path.logs", "platform-owned filesystem path"),
        (
            "repositories.url.allowed_urls",
            "SSRF and files: url repositories read any URL, file: included",
        ),
        (
            "repositories.fs.location",
            "filesystem path: an fs repository anywhere",
        ),
        (
            "xpack.security.authc.realms.file.file1.order",
            "security: a realm backed by files on the node",
        ),
        // Network binding.
        ("network.host", "platform-owned network binding"),
        ("network.bind_host", "platform-owned network binding"),
        ("http.port", "platform-owned network binding"),
        ("http.host", "platform-owned network binding"),
        ("http.bind_host", "network binding: the HTTP interface"),
        (
            "http.publish_host",
            "network binding: the advertised address",
        ),
        ("transport.port", "platform-owned network binding"),
        (
            "transport.bind_host",
            "network binding: the transport interface",
        ),
        (
            "transport.profiles.client.port",
            "network binding: an extra listening port",
        ),
        (
            "remote_cluster_server.enabled",
            "network binding: a port for other clusters",
        ),
        // Discovery and cluster identity.
        (
            "discovery.seed_hosts",
            "platform-owned discovery: join another cluster",
        ),
        (
            "discovery.ec2.endpoint",
            "platform-owned discovery: the EC2 API endpoint",
        ),
        ("cluster.name", "platform-owned identity"),
        (
            "cluster.initial_master_nodes",
            "platform-owned discovery: bootstraps a new cluster",
        ),
        ("node.name", "platform-owned identity"),
        (
            "node.roles",
            "platform-owned: roles come from the node group",
        ),
        (
            "node.attr.floe_node_group",
            "platform-owned: plans find nodes by it",
        ),
        (
            "node.attr.aws_availability_zone",
            "platform-owned: zone awareness balances on it",
        ),
        // Repository and S3 client.
        (
            "s3.client.floe.endpoint",
            "platform-owned S3 client: snapshots to another endpoint",
        ),
        (
            "s3.client.default.access_key",
            "platform-owned S3 client: credentials around the repository's",
        ),
        (
            "xpack.searchable.snapshot.shared_cache.size",
            "platform-owned: sized from the node group",
        ),
        // Allocation filtering, which plans use to drain nodes.
        (
            "cluster.routing.allocation.exclude._name",
            "plans drain nodes with allocation filtering",
        ),
        (
            "cluster.routing.allocation.require._ip",
            "plans drain nodes with allocation filtering",
        ),
        // Node-level switches outside the tenant's business.
        (
            "bootstrap.memory_lock",
            "platform-owned: the boot script sets memory limits",
        ),
        (
            "cloud.node.auto_attributes",
            "the platform's zone attributes come from it",
        ),
        (
            "indices.recovery.use_snapshots",
            "reads the platform's repository outside its lifecycle",
        ),
        (
            "cluster.blocks.read_only",
            "would stop the platform's own snapshots and restores",
        ),
        // Shapes a pattern must not over-match.
        ("thread_pool.write", "a pool, not one of its size settings"),
        (
            "thread_pool.write.size.extra",
            "deeper than the size setting",
        ),
        ("logger", "a bare prefix is no logger"),
        ("node.attr", "a bare prefix is no attribute"),
        ("indices.breaker", "a bare prefix is no breaker"),
        ("custom.attribute0", "not an Elasticsearch setting we allow"),
    ];

    const ACCEPTED: &[&str] = &[
        "thread_pool.snapshot.max",
        "thread_pool.write.size",
        "thread_pool.search.queue_size",
        "indices.memory.index_buffer_size",
        "indices.queries.cache.size",
        "indices.fielddata.cache.size",
        "indices.breaker.total.limit",
        "indices.breaker.request.limit",
        "indices.breaker.fielddata.overhead",
        "indices.recovery.max_bytes_per_sec",
        "search.max_buckets",
        "action.auto_create_index",
        "action.destructive_requires_name",
        "cluster.max_shards_per_node",
        "cluster.routing.allocation.disk.watermark.low",
        "cluster.routing.allocation.disk.watermark.flood_stage.frozen.max_headroom",
        "cluster.routing.allocation.awareness.attributes",
        "cluster.routing.allocation.awareness.force.zone.values",
        "cluster.routing.allocation.balance.shard",
        "http.max_content_length",
        "ingest.geoip.downloader.enabled",
        "xpack.ml.max_machine_memory_percent",
        "script.allowed_types",
        "script.allowed_contexts",
        "script.painless.regex.limit-factor",
        "logger.org.elasticsearch.discovery",
        "logger.level",
        "node.attr.rack",
        "node.attr.custom.nested",
        "snapshot.max_concurrent_operations",
    ];

    #[test]
    fn refused_keys_are_refused_each_for_its_reason() {
        for (key, why) in REFUSED {
            assert!(
                check_key(key).is_err(),
                "{key} is accepted, but must not be: {why}"
            );
        }
    }

    #[test]
    fn platform_owned_keys_say_so_and_others_are_not_allowed() {
        for (key, why) in REFUSED {
            let owned = why.starts_with("platform-owned");
            match check_key(key) {
                Err(Refusal::PlatformOwned(_)) => assert!(owned, "{key}: {why}"),
                Err(Refusal::NotAllowed) => assert!(!owned, "{key}: {why}"),
                Ok(()) => panic!("{key} is accepted: {why}"),
            }
        }
    }

    #[test]
    fn accepted_keys_are_accepted() {
        for key in ACCEPTED {
            assert_eq!(check_key(key), Ok(()), "{key}");
        }
    }

    #[test]
    fn every_pattern_is_dotted_words_with_wildcards_only_where_meant() {
        for p in ALLOWED_USER_SETTINGS {
            let segments: Vec<&str> = p.split('.').collect();
            for (i, s) in segments.iter().enumerate() {
                let word = !s.is_empty()
                    && s.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
                let last = i + 1 == segments.len();
                assert!(
                    word || *s == "*" || (*s == "**" && last),
                    "{p}: segment {s}"
                );
            }
            // No allowed pattern may reach into a platform-owned key.
            let sample = p.replace("**", "x").replace('*', "x");
            assert_eq!(owned_by_platform(&sample), None, "{p}");
        }
    }
}
