//! A readable summary of a config's wiring, for `--check-config`: informers and what they watch, queues and what feeds them.

use std::fmt::Write;

use super::Config;
use crate::informer::{IndexBy, InformerSpec, Predicate, QueueBinding, ShardBy, TriggerMap};
use crate::queue::{KEY_ENTRY_BYTES, QueueSettings, RateLimiterSpec};

impl Config {
    /// What the sidecar will watch and queue, one informer or queue setting a line.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        if self.informers.is_empty() {
            out.push_str("informers: none (a plain remote workqueue: no Kubernetes)\n");
        } else {
            let _ = writeln!(out, "informers ({}):", self.informers.len());
            for informer in &self.informers {
                let _ = writeln!(out, "  {}: {}", informer.name, describe_informer(informer));
            }
        }
        let _ = writeln!(out, "queues ({}):", self.queues.len());
        for queue in &self.queues {
            let _ = writeln!(out, "  {}:", queue.name);
            describe_binding(&mut out, &queue.binding);
            describe_settings(&mut out, &queue.settings);
        }
        if !self.informers.is_empty() {
            let _ = writeln!(out, "writes through the sidecar: field manager {:?}", self.field_manager);
            if self.writes.is_empty() {
                out.push_str("  none declared: every write is refused (PERMISSION_DENIED)\n");
            }
            for rule in &self.writes {
                let _ = writeln!(out, "  {rule}");
            }
        }
        out
    }
}

fn describe_informer(spec: &InformerSpec) -> String {
    let mut parts = vec![format!("{} {}", spec.api_version(), spec.kind)];
    parts.push(match &spec.namespace {
        Some(namespace) => format!("namespace {namespace}"),
        None => "all namespaces".to_owned(),
    });
    if let Some(selector) = &spec.label_selector {
        parts.push(format!("labels {selector}"));
    }
    if let Some(selector) = &spec.field_selector {
        parts.push(format!("fields {selector}"));
    }
    if spec.metadata_only {
        parts.push("metadata only".to_owned());
    }
    if !spec.strip_managed_fields {
        parts.push("keeps managedFields".to_owned());
    }
    if let Some(every) = spec.resync {
        parts.push(format!("resync every {every:?}"));
    }
    for index in &spec.indexes {
        let by = match &index.by {
            IndexBy::Namespace => "namespace".to_owned(),
            IndexBy::Owner => "owner".to_owned(),
            IndexBy::Field(path) => format!("field {path}"),
        };
        parts.push(format!("index {} by {by}", index.name));
    }
    parts.push(match (spec.serves_cache_reads(), spec.is_sensitive()) {
        (true, true) => "cache reads served (credentials: declared cache_reads: true)".to_owned(),
        (true, false) => "cache reads served".to_owned(),
        (false, true) => "no cache reads (credentials: cache_reads: true to serve)".to_owned(),
        (false, false) => "no cache reads (no queue uses it: cache_reads: true to serve)".to_owned(),
    });
    parts.join(", ")
}

fn describe_binding(out: &mut String, binding: &QueueBinding) {
    let Some(primary) = &binding.primary else {
        out.push_str("    keys: added by hand (no primary informer)\n");
        return;
    };
    let _ = writeln!(out, "    primary: {primary} (keys namespace/name, or name when cluster-scoped)");
    for trigger in &binding.triggers {
        let how = match &trigger.map {
            TriggerMap::Owner { controller_only: true } => "by its controller owner reference".to_owned(),
            TriggerMap::Owner { controller_only: false } => "by its owner references".to_owned(),
            TriggerMap::Label(label) => format!("by the value of its label {label}"),
            TriggerMap::Index { index, value } => format!("through the primary's index {index} ({value:?})"),
        };
        let filters = match trigger.predicates.as_slice() {
            [] => String::new(),
            some => format!(", updates when {}", predicates(some)),
        };
        let _ = writeln!(out, "    trigger: {} {how}{filters}", trigger.informer);
    }
    let updates = match binding.predicates.as_slice() {
        [] => "every update".to_owned(),
        some => predicates(some),
    };
    let _ = writeln!(out, "    primary updates queued: {updates}");
    let p = &binding.priorities;
    let _ = writeln!(
        out,
        "    priorities: events {}, triggers {}, initial list {}, resync {}",
        p.events, p.triggers, p.initial_list, p.resync
    );
    if let Some(finalizer) = &binding.finalizer {
        let _ = writeln!(
            out,
            "    finalizer: {finalizer} (kept on live primaries, removed after a deleting one's success)"
        );
    }
    if let Some(by) = binding.shard_by {
        let field = match by {
            ShardBy::Uid => "uid",
            ShardBy::Namespace => "namespace",
        };
        let _ = writeln!(out, "    sharded by the primary's {field}: each replica grants only the keys of its slots");
    }
}

fn predicates(predicates: &[Predicate]) -> String {
    let names: Vec<&str> = predicates
        .iter()
        .map(|p| match p {
            Predicate::GenerationChanged => "the generation changed",
            Predicate::LabelsChanged => "labels changed",
            Predicate::AnnotationsChanged => "annotations changed",
        })
        .collect();
    names.join(" or ")
}

fn describe_settings(out: &mut String, settings: &QueueSettings) {
    let _ = writeln!(
        out,
        "    leases: {:?} (at most {:?}); aging after {:?}; settle timeout {:?}",
        settings.lease_ttl, settings.max_lease_ttl, settings.max_wait, settings.settle_timeout
    );
    let _ = writeln!(
        out,
        "    bounds: {} keys, {} KiB of keys ({} bytes per key plus 1.25 times its text)",
        settings.max_keys,
        settings.max_memory / 1024,
        KEY_ENTRY_BYTES
    );
    let _ = writeln!(out, "    retries: {}", rate_limiter(&settings.rate_limiter));
}

fn rate_limiter(spec: &RateLimiterSpec) -> String {
    match spec {
        RateLimiterSpec::Exponential { base, max } => format!("exponential {base:?}..{max:?}"),
        RateLimiterSpec::FastSlow { fast, slow, fast_attempts } => {
            format!("{fast:?} for {fast_attempts} attempts, then {slow:?}")
        }
        RateLimiterSpec::Bucket { qps, burst } => format!("bucket {qps} qps, burst {burst}"),
        RateLimiterSpec::MaxOf(all) => {
            format!("the longest of ({})", all.iter().map(rate_limiter).collect::<Vec<_>>().join("; "))
        }
        RateLimiterSpec::MaxDelay { limiter, max } => format!("{}, at most {max:?}", rate_limiter(limiter)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_should_name_each_informer_and_what_feeds_each_queue() {
        let text = "informers:\n  users: { group: example.com, version: v1, kind: User, resync: 10m }\n  namespaces:\n    version: v1\n    kind: Namespace\n    label_selector: app.kubernetes.io/managed-by=users-reconciler\n    metadata_only: true\nqueues:\n  users:\n    primary: users\n    finalizer: example.com/namespace\n    triggers: [{ informer: namespaces, by: owner, controller_only: true }]\n";
        let summary = Config::parse(text, "users.yaml").unwrap().summary();
        for line in [
            "informers (2):",
            "  users: example.com/v1 User, all namespaces, resync every 600s",
            "  namespaces: v1 Namespace, all namespaces, labels app.kubernetes.io/managed-by=users-reconciler, metadata only",
            "  users:\n    primary: users (keys namespace/name, or name when cluster-scoped)",
            "    trigger: namespaces by its controller owner reference",
            "    retries: the longest of (exponential 5ms..1000s; bucket 10 qps, burst 100)",
            "    finalizer: example.com/namespace",
            "resync every 600s, cache reads served\n",
        ] {
            assert!(summary.contains(line), "{line:?} not in:\n{summary}");
        }
        assert!(!summary.contains("QueueSettings"), "no debug dump:\n{summary}");
        let unused = "informers:\n  s: { version: v1, kind: Secret }\n  c: { version: v1, kind: ConfigMap }\nqueues:\n  q: { primary: s }\n";
        let summary = Config::parse(unused, "c.yaml").unwrap().summary();
        assert!(summary.contains("  s: v1 Secret, all namespaces, no cache reads (credentials"), "{summary}");
        assert!(summary.contains("  c: v1 ConfigMap, all namespaces, no cache reads (no queue uses it"), "{summary}");
        let declared = unused.replace("kind: Secret", "kind: Secret, cache_reads: true");
        let summary = Config::parse(&declared, "c.yaml").unwrap().summary();
        assert!(summary.contains("  s: v1 Secret, all namespaces, cache reads served (credentials"), "{summary}");
        let standalone = Config::standalone().summary();
        assert!(standalone.starts_with("informers: none"), "{standalone}");
        assert!(standalone.contains("  default:\n    keys: added by hand"), "{standalone}");
    }
}
