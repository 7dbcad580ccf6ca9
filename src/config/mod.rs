//! The YAML config file: the informers and queues to serve, with errors that name file, field and position.
//!
//! ```yaml
//! informers:
//!   users: { group: example.com, version: v1, kind: User, resync: 10m }
//!   namespaces: { version: v1, kind: Namespace, indexes: { by-owner: owner } }
//! queues:
//!   orders:
//!     lease_ttl: 30s
//!     rate_limiter:
//!       max_of:
//!         - exponential: { base: 5ms, max: 5m }
//!         - bucket: { qps: 10, burst: 100 }
//!   users:
//!     primary: users
//!     triggers: [{ informer: namespaces, by: owner }]
//!     predicates: [generation_changed, labels_changed]
//! ```
//!
//! Every field of a queue is optional and defaults to
//! [`QueueSettings::default()`]. Reading goes in three steps, each with its
//! own error: the YAML syntax, then the shape (types, unknown fields, names,
//! durations, with the field's path and position), then the values
//! ([`QueueSettings::validate`], with the field's path).

mod binding;
mod byte_size;
mod document;
mod duration;
mod error;
mod informer;
mod parsed_text;
mod queue_name;
mod rate_limiter;
mod shard_by;
mod summary;
mod writes;

use std::path::Path;

pub use error::{ConfigError, Position};

use crate::informer::{InformerSpec, LanePriorities, QueueBinding, ShardBy, TriggerMap};
use crate::objects::WriteRule;
use crate::queue::QueueSettings;
use document::FileDoc;

/// Name of the one queue served when no config file is given.
pub const STANDALONE_QUEUE: &str = "default";

/// What the sidecar serves, as read from the config file.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The queues, in the order the file lists them; names are unique.
    pub queues: Vec<QueueConfig>,
    /// The shared informers, in file order; names are unique. Empty: no
    /// Kubernetes at all (a plain remote workqueue).
    pub informers: Vec<InformerSpec>,
    /// The field manager of writes through the sidecar (ObjectService) that
    /// name none themselves.
    pub field_manager: String,
    /// What workers may write through the sidecar, in file order; empty:
    /// nothing (every ObjectService write is refused).
    pub writes: Vec<WriteRule>,
}

/// The field manager of writes when neither the config nor the request names one.
pub const DEFAULT_FIELD_MANAGER: &str = "workqueue-sidecar";
/// Longest field manager the API server accepts.
const MAX_FIELD_MANAGER_BYTES: usize = 128;

/// One named queue and how it behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The name requests use to address the queue.
    pub name: String,
    /// Leases, aging, rate limits and bounds; already validated.
    pub settings: QueueSettings,
    /// Which informers feed the queue; every name it uses is defined.
    pub binding: QueueBinding,
}

impl Config {
    /// Reads and checks the config file at `path`; errors name the file as given.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { file: file.clone(), source })?;
        Config::parse(&text, &file)
    }

    /// Reads and checks config text; `origin` names it in errors (a file path).
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        // Syntax first, so a broken file is reported as such rather than as
        // whichever field the decoder happened to be reading.
        serde_yaml_ng::from_str::<serde::de::IgnoredAny>(text).map_err(|error| ConfigError::syntax(origin, &error))?;
        let doc: FileDoc = serde_path_to_error::deserialize(serde_yaml_ng::Deserializer::from_str(text))
            .map_err(|error| ConfigError::field(origin, &error))?;

        let entries = doc.queues.map(|q| q.0).unwrap_or_default();
        if entries.is_empty() {
            return Err(ConfigError::NoQueues { file: origin.to_owned() });
        }
        let mut informers = doc.informers.map(|i| i.0).unwrap_or_default();
        let queues: Vec<QueueConfig> =
            entries
                .into_iter()
                .map(|entry| {
                    let name = entry.name;
                    entry.settings.validate().map_err(|source| ConfigError::Setting {
                        file: origin.to_owned(),
                        path: format!("queues.{name}"),
                        source,
                    })?;
                    check_binding(&name, &entry.binding, &informers).map_err(|(field, problem)| {
                        ConfigError::Field { file: origin.to_owned(), field, problem, position: None }
                    })?;
                    Ok(QueueConfig { name, settings: entry.settings, binding: entry.binding })
                })
                .collect::<Result<_, ConfigError>>()?;
        let field_manager = match doc.field_manager {
            None => DEFAULT_FIELD_MANAGER.to_owned(),
            Some(name) if name.is_empty() || name.len() > MAX_FIELD_MANAGER_BYTES => {
                return Err(ConfigError::Field {
                    file: origin.to_owned(),
                    field: "field_manager".into(),
                    problem: format!("must be 1 to {MAX_FIELD_MANAGER_BYTES} bytes, got {}", name.len()),
                    position: None,
                });
            }
            Some(name) => name,
        };
        // Cache reads: as declared, else whether a queue uses the informer;
        // a sensitive kind only when declared.
        for informer in &mut informers {
            let used = queues.iter().any(|q| q.binding.uses(&informer.name));
            informer.cache_reads = Some(informer.cache_reads.unwrap_or(used && !informer.is_sensitive()));
        }
        let writes = doc
            .writes
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, entry)| {
                entry.rule().map_err(|(field, problem)| ConfigError::Field {
                    file: origin.to_owned(),
                    field: format!("writes[{i}].{field}"),
                    problem,
                    position: None,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        if !writes.is_empty() && informers.is_empty() {
            return Err(ConfigError::Field {
                file: origin.to_owned(),
                field: "writes".into(),
                problem: "declares writes, but without informers the sidecar has no Kubernetes client to make them"
                    .into(),
                position: None,
            });
        }
        Ok(Config { queues, informers, field_manager, writes })
    }

    /// The config without a file: one queue named `default` with default settings.
    pub fn standalone() -> Config {
        Config {
            queues: vec![QueueConfig {
                name: STANDALONE_QUEUE.to_owned(),
                settings: QueueSettings::default(),
                binding: QueueBinding::default(),
            }],
            informers: Vec::new(),
            field_manager: DEFAULT_FIELD_MANAGER.to_owned(),
            writes: Vec::new(),
        }
    }
}

/// Checks that every informer and index a queue names is defined; the error
/// is the field's path and the problem.
fn check_binding(queue: &str, binding: &QueueBinding, informers: &[InformerSpec]) -> Result<(), (String, String)> {
    let unknown = |name: &str| {
        let defined: Vec<&str> = informers.iter().map(|i| i.name.as_str()).collect();
        if defined.is_empty() {
            format!("unknown informer {name:?}: no informer is defined under `informers`")
        } else {
            format!("unknown informer {name:?}; defined informers: {}", defined.join(", "))
        }
    };
    let find = |name: &str| informers.iter().find(|i| i.name == name);
    let primary = match &binding.primary {
        Some(name) => Some(find(name).ok_or_else(|| (format!("queues.{queue}.primary"), unknown(name)))?),
        None => None,
    };
    for (i, trigger) in binding.triggers.iter().enumerate() {
        let field = format!("queues.{queue}.triggers[{i}]");
        if find(&trigger.informer).is_none() {
            return Err((format!("{field}.informer"), unknown(&trigger.informer)));
        }
        let Some(primary) = primary else {
            return Err((field, "triggers enqueue keys of the primary informer: set `primary` too".to_owned()));
        };
        if let TriggerMap::Index { index, .. } = &trigger.map
            && primary.index(index).is_none()
        {
            let defined: Vec<&str> = primary.indexes.iter().map(|i| i.name.as_str()).collect();
            return Err((
                format!("{field}.index"),
                format!(
                    "informer {:?} (the primary) has no index {index:?}; its indexes: {}",
                    primary.name,
                    if defined.is_empty() { "none".to_owned() } else { defined.join(", ") }
                ),
            ));
        }
    }
    if let Some(finalizer) = &binding.finalizer {
        let field = format!("queues.{queue}.finalizer");
        if primary.is_none() {
            return Err((field, "the finalizer is kept on the primary's objects: set `primary` too".to_owned()));
        }
        check_finalizer_name(finalizer).map_err(|problem| (field, problem))?;
    }
    check_sharded_informers(queue, binding, informers)?;
    if primary.is_none() && binding.shard_by.is_some() {
        return Err((
            format!("queues.{queue}.shard_by"),
            "a queue's keys are sharded by its primary's objects: set `primary` too".to_owned(),
        ));
    }
    if primary.is_none() && binding.priorities != LanePriorities::default() {
        return Err((
            format!("queues.{queue}.priorities"),
            "priorities are those of the primary's and the triggers' events: set `primary` too".to_owned(),
        ));
    }
    if primary.is_none() && !binding.predicates.is_empty() {
        return Err((
            format!("queues.{queue}.predicates"),
            "predicates filter the primary's updates: set `primary` too".to_owned(),
        ));
    }
    Ok(())
}

/// An informer that lists only this replica's share feeds only queues sharded
/// alike: its primary shards the queue's keys the same way, and a trigger's
/// objects fall in their primary's slot only when both go by namespace.
fn check_sharded_informers(
    queue: &str,
    binding: &QueueBinding,
    informers: &[InformerSpec],
) -> Result<(), (String, String)> {
    let shard_by = |name: &str| informers.iter().find(|i| i.name == name).and_then(|i| i.shard_by);
    let field = |by: ShardBy| match by {
        ShardBy::Uid => "uid",
        ShardBy::Namespace => "namespace",
    };
    if let Some(primary) = binding.primary.as_deref()
        && let Some(by) = shard_by(primary)
        && binding.shard_by != Some(by)
    {
        return Err((
            format!("queues.{queue}.shard_by"),
            format!(
                "informer {primary:?} lists only this replica's share by {}: the queue must set `shard_by: {}` too, \
                 or the informer keep every object",
                field(by),
                field(by)
            ),
        ));
    }
    for (i, trigger) in binding.triggers.iter().enumerate() {
        if let Some(by) = shard_by(&trigger.informer)
            && (by != ShardBy::Namespace || binding.shard_by != Some(ShardBy::Namespace))
        {
            return Err((
                format!("queues.{queue}.triggers[{i}]"),
                format!(
                    "informer {:?} lists only this replica's share by {}, but a trigger's objects fall in their \
                     primary's slot only when the informer and the queue both shard by namespace: keep the \
                     trigger's informer whole",
                    trigger.informer,
                    field(by)
                ),
            ));
        }
    }
    Ok(())
}

/// A finalizer name as the API server takes one: `domain/name`, a DNS
/// subdomain before the slash and a short name after it.
fn check_finalizer_name(name: &str) -> Result<(), String> {
    let bad = |why: &str| Err(format!("{name:?} is not a finalizer name: {why} (e.g. \"example.com/cleanup\")"));
    let Some((domain, short)) = name.split_once('/') else { return bad("it needs a domain and a slash") };
    if !domain.contains('.') || !crate::k8s_names::is_dns_subdomain(domain) {
        return bad("the part before the slash must be a DNS subdomain with a dot");
    }
    let short_ok = !short.is_empty()
        && short.len() <= 63
        && short.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && short.starts_with(|c: char| c.is_ascii_alphanumeric())
        && short.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !short_ok {
        return bad("the part after the slash must be 1-63 letters, digits, '-', '_' or '.'");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::queue::RateLimiterSpec;

    const FILE: &str = "deploy/examples/bad.yaml";

    fn parse_err(yaml: &str) -> ConfigError {
        Config::parse(yaml, FILE).expect_err("the config should be refused")
    }

    /// The error's field, problem and position, for `Field` errors.
    fn field_err(yaml: &str) -> (String, String, Option<(usize, usize)>) {
        match parse_err(yaml) {
            ConfigError::Field { file, field, problem, position } => {
                assert_eq!(file, FILE);
                (field, problem, position.map(|p| (p.line, p.column)))
            }
            other => panic!("expected a field error, got {other:?}"),
        }
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const FULL_EXAMPLE: &str = "\
queues:
  default:
    lease_ttl: 30s
    max_lease_ttl: 10m
    max_wait: 30s
    max_keys: 1000000
    max_memory: 256Mi
    rate_limiter:
      max_of:
        - exponential: { base: 5ms, max: 1000s }
        - bucket: { qps: 10, burst: 100 }
        - fast_slow: { fast: 10ms, slow: 10s, fast_attempts: 5 }
        - max_delay: { max: 5m, limiter: { exponential: { base: 5ms, max: 1000s } } }
  orders:
    lease_ttl: 1h 30m
    max_lease_ttl: 2h
";

    #[test]
    fn bounds_should_default_when_left_out_and_read_numbers_and_sizes() {
        let yaml = "queues:\n  a: {}\n  b:\n    max_keys: 7\n    max_memory: 512Ki\n  c:\n    max_memory: 1048576\n";
        let config = Config::parse(yaml, "q.yaml").unwrap();
        let bounds: Vec<_> = config.queues.iter().map(|q| (q.settings.max_keys, q.settings.max_memory)).collect();
        let (keys, memory) = (crate::queue::DEFAULT_MAX_KEYS, crate::queue::DEFAULT_MAX_MEMORY);
        assert_eq!(bounds, vec![(keys, memory), (7, 512 << 10), (keys, 1 << 20)]);
    }

    /// Every queue is bounded: `max_keys: ~` once meant no limit, and a
    /// size below a few keys' worth or without a binary suffix is refused.
    #[test]
    fn bounds_should_refuse_null_a_decimal_suffix_and_too_little_memory() {
        let (field, problem, position) = field_err("queues:\n  a:\n    max_keys: ~\n");
        assert_eq!(field, "queues.a.max_keys");
        assert!(problem.contains("every queue is bounded"), "{problem}");
        assert!(position.is_some());
        let (field, problem, _) = field_err("queues:\n  a:\n    max_memory: 64M\n");
        assert_eq!(field, "queues.a.max_memory");
        assert!(problem.contains("Mi"), "{problem}");
        let err = parse_err("queues:\n  a:\n    max_memory: 1Ki\n");
        assert!(err.to_string().contains("queues.a.max_memory: must be at least 65536 bytes"), "{err}");
    }

    #[test]
    fn a_duration_past_the_maximum_should_be_refused_with_its_field() {
        let yaml = "queues:\n  a:\n    rate_limiter:\n      exponential: { base: 1000000000h, max: 1000000000h }\n";
        let (field, problem, _) = field_err(yaml);
        assert_eq!(field, "queues.a.rate_limiter.exponential.base");
        assert!(problem.contains("longer than the most allowed"), "{problem}");
    }

    #[test]
    fn config_should_read_the_full_example() {
        let config = Config::parse(FULL_EXAMPLE, "full.yaml").unwrap();
        let exponential = RateLimiterSpec::Exponential { base: ms(5), max: secs(1000) };
        let default = QueueConfig {
            binding: QueueBinding::default(),
            name: "default".into(),
            settings: QueueSettings {
                lease_ttl: secs(30),
                max_lease_ttl: secs(600),
                max_wait: secs(30),
                max_keys: 1_000_000,
                max_memory: 256 << 20,
                settle_timeout: secs(10),
                rate_limiter: RateLimiterSpec::MaxOf(vec![
                    exponential.clone(),
                    RateLimiterSpec::Bucket { qps: 10.0, burst: 100 },
                    RateLimiterSpec::FastSlow { fast: ms(10), slow: secs(10), fast_attempts: 5 },
                    RateLimiterSpec::MaxDelay { limiter: Box::new(exponential), max: secs(300) },
                ]),
            },
        };
        let orders = QueueConfig {
            binding: QueueBinding::default(),
            name: "orders".into(),
            settings: QueueSettings { lease_ttl: secs(5400), max_lease_ttl: secs(7200), ..QueueSettings::default() },
        };
        assert_eq!(config.queues, vec![default, orders]);
    }

    #[test]
    fn config_should_keep_the_queues_in_file_order() {
        let config = Config::parse("queues:\n  zeta: {}\n  alpha: {}\n  mid: {}\n", FILE).unwrap();
        let names: Vec<_> = config.queues.iter().map(|q| q.name.as_str()).collect();
        assert_eq!(names, ["zeta", "alpha", "mid"]);
    }

    #[test]
    fn config_should_default_every_field_left_out() {
        for yaml in ["queues:\n  a:\n", "queues:\n  a: {}\n", "queues: { a: ~ }\n"] {
            let config = Config::parse(yaml, FILE).unwrap();
            assert_eq!(
                config.queues,
                vec![QueueConfig {
                    name: "a".into(),
                    settings: QueueSettings::default(),
                    binding: QueueBinding::default()
                }],
                "{yaml}"
            );
        }
    }

    #[test]
    fn standalone_should_serve_one_default_queue_with_default_settings() {
        let config = Config::standalone();
        assert_eq!(config.queues.len(), 1);
        assert_eq!(config.queues[0].name, "default");
        assert_eq!(config.queues[0].settings, QueueSettings::default());
    }

    #[test]
    fn standalone_example_file_should_parse_to_the_defaults_with_a_five_minute_cap() {
        let text = include_str!("../../deploy/examples/standalone.yaml");
        let config = Config::parse(text, "deploy/examples/standalone.yaml").unwrap();
        let expected = QueueSettings {
            rate_limiter: RateLimiterSpec::MaxOf(vec![
                RateLimiterSpec::Exponential { base: ms(5), max: secs(300) },
                RateLimiterSpec::Bucket { qps: 10.0, burst: 100 },
            ]),
            ..QueueSettings::default()
        };
        assert_eq!(
            config.queues,
            vec![QueueConfig { name: "default".into(), settings: expected, binding: QueueBinding::default() }]
        );
    }

    #[test]
    fn config_should_name_the_field_of_a_bad_duration() {
        let yaml = "queues:\n  orders:\n    lease_ttl: 30 parsecs\n";
        assert_eq!(
            parse_err(yaml).to_string(),
            "deploy/examples/bad.yaml: queues.orders.lease_ttl: invalid duration \"30 parsecs\": \
             unknown time unit \"parsecs\", use one of ns, us, ms, s, m, h, d (line 3, column 16)"
        );
    }

    #[test]
    fn config_should_name_the_field_and_position_of_a_wrong_type() {
        let (field, problem, position) = field_err("queues:\n  orders:\n    max_keys: lots\n");
        assert_eq!(field, "queues.orders.max_keys");
        assert!(problem.starts_with("invalid type: string \"lots\""), "{problem}");
        assert_eq!(position, Some((3, 15)));
    }

    #[test]
    fn config_should_name_a_nested_rate_limiter_field() {
        let yaml = "\
queues:
  orders:
    rate_limiter:
      max_of:
        - exponential: { base: 5ms, max: 5m }
        - bucket: { qps: fast, burst: 100 }
";
        let (field, problem, position) = field_err(yaml);
        assert_eq!(field, "queues.orders.rate_limiter.max_of[1].bucket.qps");
        assert!(problem.starts_with("invalid type: string \"fast\""), "{problem}");
        assert_eq!(position, Some((6, 26)));
    }

    #[test]
    fn config_should_name_an_unknown_field() {
        let (field, problem, position) = field_err("queues:\n  orders:\n    lease_tll: 5s\n");
        assert_eq!(field, "queues.orders.lease_tll");
        assert!(problem.starts_with("unknown field `lease_tll`, expected one of `lease_ttl`"), "{problem}");
        assert_eq!(position, Some((3, 5)));
    }

    #[test]
    fn config_should_name_an_unknown_top_level_field() {
        let (field, problem, _) = field_err("queue:\n  orders: {}\n");
        assert_eq!(field, "queue");
        assert!(problem.starts_with("unknown field `queue`"), "{problem}");
    }

    const INFORMER_EXAMPLE: &str = "\
informers:
  users:
    group: example.com
    version: v1
    kind: User
    resync: 10m
    indexes:
      by-ns: namespace
      by-owner: owner
      by-team: { field: spec.team }
  namespaces:
    version: v1
    kind: Namespace
    label_selector: app=web
    field_selector: metadata.name!=default
    metadata_only: true
    strip_managed_fields: false
  pods: { version: v1, kind: Pod, namespace: apps, resync: 0s }
queues:
  users:
    primary: users
    triggers:
      - { informer: namespaces, by: owner, controller_only: true }
      - { informer: pods, by: label, label: example.com/user, predicates: [labels_changed] }
      - { informer: pods, by: index, index: by-team, value: key }
    predicates: [generation_changed, annotations_changed]
    priorities: { initial_list: -50, triggers: 5 }
  plain: {}
";

    #[test]
    fn config_should_read_informers_and_queue_bindings() {
        use crate::informer::{IndexBy, IndexSpec, IndexValue, LanePriorities, Predicate, TriggerSpec};
        let config = Config::parse(INFORMER_EXAMPLE, FILE).unwrap();
        let mut users = InformerSpec::new("users", "example.com", "v1", "User");
        users.resync = Some(secs(600));
        users.indexes = vec![
            IndexSpec { name: "by-ns".into(), by: IndexBy::Namespace },
            IndexSpec { name: "by-owner".into(), by: IndexBy::Owner },
            IndexSpec { name: "by-team".into(), by: IndexBy::Field("spec.team".into()) },
        ];
        let mut namespaces = InformerSpec::new("namespaces", "", "v1", "Namespace");
        namespaces.label_selector = Some("app=web".into());
        namespaces.field_selector = Some("metadata.name!=default".into());
        namespaces.metadata_only = true;
        namespaces.strip_managed_fields = false;
        let mut pods = InformerSpec::new("pods", "", "v1", "Pod");
        pods.namespace = Some("apps".into());
        assert_eq!(config.informers, vec![users, namespaces, pods]);

        let binding = &config.queues[0].binding;
        assert_eq!(binding.primary.as_deref(), Some("users"));
        assert_eq!(
            binding.triggers,
            vec![
                TriggerSpec {
                    informer: "namespaces".into(),
                    map: TriggerMap::Owner { controller_only: true },
                    predicates: vec![]
                },
                TriggerSpec {
                    informer: "pods".into(),
                    map: TriggerMap::Label("example.com/user".into()),
                    predicates: vec![Predicate::LabelsChanged]
                },
                TriggerSpec {
                    informer: "pods".into(),
                    map: TriggerMap::Index { index: "by-team".into(), value: IndexValue::Key },
                    predicates: vec![]
                },
            ]
        );
        assert_eq!(binding.predicates, vec![Predicate::GenerationChanged, Predicate::AnnotationsChanged]);
        assert_eq!(binding.priorities, LanePriorities { initial_list: -50, triggers: 5, ..LanePriorities::default() });
        assert_eq!(binding.informers(), vec!["users", "namespaces", "pods"]);
        assert!(config.queues[1].binding.is_plain());
    }

    #[test]
    fn a_sharded_informer_should_feed_only_queues_sharded_alike() {
        let informers = "informers:\n  u: { version: v1, kind: User, shard_by: uid }\n  n: { version: v1, kind: Namespace, shard_by: namespace }\n  w: { version: v1, kind: Namespace }\n";
        let ok = format!(
            "{informers}queues:\n  q: {{ primary: u, shard_by: uid, triggers: [{{ informer: w, by: owner }}] }}\n"
        );
        assert!(Config::parse(&ok, FILE).is_ok());
        let unsharded = format!("{informers}queues:\n  q: {{ primary: u }}\n");
        let err = parse_err(&unsharded).to_string();
        assert!(err.contains("queues.q.shard_by: informer \"u\" lists only this replica's share by uid"), "{err}");
        let by_uid_trigger = format!(
            "{informers}queues:\n  q: {{ primary: u, shard_by: uid, triggers: [{{ informer: n, by: owner }}] }}\n"
        );
        let err = parse_err(&by_uid_trigger).to_string();
        assert!(err.contains("queues.q.triggers[0]") && err.contains("keep the trigger's informer whole"), "{err}");
    }

    #[test]
    fn shard_by_should_take_uid_or_namespace_and_need_a_primary() {
        use crate::informer::ShardBy;
        for (field, by) in [("uid", ShardBy::Uid), ("namespace", ShardBy::Namespace)] {
            let yaml = format!(
                "informers:\n  u: {{ version: v1, kind: User }}\nqueues:\n  q: {{ primary: u, shard_by: {field} }}\n"
            );
            assert_eq!(Config::parse(&yaml, FILE).unwrap().queues[0].binding.shard_by, Some(by));
        }
        let err = parse_err("queues:\n  q: { shard_by: uid }\n").to_string();
        assert!(err.contains("queues.q.shard_by: a queue's keys are sharded by its primary's objects"), "{err}");
        let err =
            parse_err("informers:\n  u: { version: v1, kind: User }\nqueues:\n  q: { primary: u, shard_by: name }\n")
                .to_string();
        assert!(err.contains("shard_by") && err.contains("`uid` or `namespace`"), "{err}");
    }

    #[test]
    fn a_finalizer_should_need_a_primary_and_a_qualified_name() {
        let yaml = "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q: { primary: u, finalizer: example.com/cleanup }\n";
        let config = Config::parse(yaml, FILE).unwrap();
        assert_eq!(config.queues[0].binding.finalizer.as_deref(), Some("example.com/cleanup"));
        let err = parse_err("queues:\n  q: { finalizer: example.com/cleanup }\n").to_string();
        assert!(err.contains("queues.q.finalizer: the finalizer is kept on the primary's objects"), "{err}");
        for bad in ["cleanup", "example/cleanup", "example.com/", "Example.com/x", "example.com/-x"] {
            let yaml = format!(
                "informers:\n  u: {{ version: v1, kind: User }}\nqueues:\n  q: {{ primary: u, finalizer: {bad} }}\n"
            );
            let err = parse_err(&yaml).to_string();
            assert!(err.contains("queues.q.finalizer") && err.contains("is not a finalizer name"), "{bad}: {err}");
        }
    }

    #[test]
    fn config_should_name_an_unknown_primary_informer() {
        let err = parse_err("informers:\n  users: { version: v1, kind: User }\nqueues:\n  q: { primary: usres }\n");
        assert_eq!(
            err.to_string(),
            "deploy/examples/bad.yaml: queues.q.primary: unknown informer \"usres\"; defined informers: users"
        );
        let err = parse_err("queues:\n  q: { primary: users }\n");
        assert!(err.to_string().contains("no informer is defined under `informers`"), "{err}");
    }

    #[test]
    fn config_should_name_an_unknown_trigger_informer_and_index() {
        let yaml = "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q:\n    primary: u\n    triggers:\n      - { informer: u, by: index, index: nope }\n";
        let err = parse_err(yaml);
        assert_eq!(
            err.to_string(),
            "deploy/examples/bad.yaml: queues.q.triggers[0].index: informer \"u\" (the primary) has no index \"nope\"; its indexes: none"
        );
        let yaml = "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q:\n    primary: u\n    triggers: [{ informer: x, by: owner }]\n";
        assert!(parse_err(yaml).to_string().contains("queues.q.triggers[0].informer: unknown informer \"x\""));
        let yaml =
            "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q:\n    triggers: [{ informer: u, by: owner }]\n";
        assert!(parse_err(yaml).to_string().contains("queues.q.triggers[0]: triggers enqueue keys of the primary"));
    }

    #[test]
    fn config_should_name_the_field_and_position_of_a_bad_informer() {
        let (field, problem, position) = field_err("informers:\n  u:\n    version: v1\nqueues:\n  q: {}\n");
        assert_eq!(field, "informers.u");
        assert!(problem.starts_with("missing field `kind`"), "{problem}");
        assert!(position.is_some());
        let (field, problem, position) = field_err(
            "informers:\n  u:\n    version: v1\n    kind: User\n    indexes: { a: nodes }\nqueues:\n  q: {}\n",
        );
        assert_eq!(field, "informers.u.indexes.a");
        assert!(problem.starts_with("unknown index kind \"nodes\", expected one of `namespace`, `owner`"), "{problem}");
        assert_eq!(position, Some((5, 19)));
        let (field, problem, _) = field_err("informers:\n  U: { version: v1, kind: User }\nqueues:\n  q: {}\n");
        assert_eq!(field, "informers.U");
        assert!(problem.starts_with("informer name \"U\" is not allowed"), "{problem}");
    }

    #[test]
    fn config_should_refuse_a_malformed_selector_with_its_field_and_position() {
        let yaml = "informers:\n  u:\n    version: v1\n    kind: User\n    label_selector: a in (b\nqueues:\n  q: {}\n";
        let (field, problem, position) = field_err(yaml);
        assert_eq!(field, "informers.u.label_selector");
        assert!(problem.starts_with("unclosed '('"), "{problem}");
        assert!(position.is_some());
        let yaml =
            "informers:\n  u:\n    version: v1\n    kind: User\n    field_selector: metadata.name\nqueues:\n  q: {}\n";
        let (field, problem, _) = field_err(yaml);
        assert_eq!(field, "informers.u.field_selector");
        assert!(problem.contains("has no operator"), "{problem}");
    }

    #[test]
    fn config_should_refuse_a_trigger_with_keys_of_another_mapping() {
        let yaml = "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q:\n    primary: u\n    triggers:\n      - { informer: u, by: owner, label: x }\n";
        let (field, problem, position) = field_err(yaml);
        assert_eq!(field, "queues.q.triggers[0]");
        assert_eq!(problem, "`label` belongs to `by: label` triggers only");
        assert!(position.is_some());
        let yaml = "informers:\n  u: { version: v1, kind: User }\nqueues:\n  q:\n    primary: u\n    triggers: [{ informer: u, by: label }]\n";
        let (_, problem, _) = field_err(yaml);
        assert!(problem.starts_with("`by: label` needs `label`"), "{problem}");
        let yaml = "queues:\n  q:\n    predicates: [spec_changed]\n";
        let (field, problem, _) = field_err(yaml);
        assert_eq!(field, "queues.q.predicates[0]");
        assert!(problem.starts_with("unknown variant `spec_changed`"), "{problem}");
    }

    #[test]
    fn config_should_read_an_empty_informers_map_as_none() {
        for yaml in ["informers: ~\nqueues:\n  orders: {}\n", "informers: {}\nqueues:\n  orders: {}\n"] {
            assert!(Config::parse(yaml, FILE).unwrap().informers.is_empty(), "{yaml}");
        }
    }

    #[test]
    fn config_should_refuse_a_queue_defined_twice_at_its_second_line() {
        let (field, problem, position) = field_err("queues:\n  orders: {}\n  users: {}\n  orders: {}\n");
        assert_eq!(field, "queues.orders");
        assert_eq!(problem, "queue \"orders\" is defined twice; queue names must be unique");
        assert_eq!(position, Some((4, 3)));
    }

    #[test]
    fn config_should_refuse_a_bad_queue_name_and_say_what_is_allowed() {
        let (field, problem, position) = field_err("queues:\n  Orders: {}\n");
        assert_eq!(field, "queues.Orders");
        assert!(problem.starts_with("queue name \"Orders\" is not allowed: use 1 to 253"), "{problem}");
        assert_eq!(position, Some((2, 3)));
    }

    #[test]
    fn config_should_refuse_a_file_without_queues() {
        for yaml in ["", "queues:\n", "queues: {}\n", "# only a comment\n"] {
            let err = parse_err(yaml);
            assert!(matches!(err, ConfigError::NoQueues { .. }), "{yaml:?}: {err:?}");
            assert_eq!(
                err.to_string(),
                "deploy/examples/bad.yaml: queues: define at least one queue or run without \
                 --config for the standalone `default` queue"
            );
        }
    }

    #[test]
    fn config_should_report_a_syntax_error_with_its_position() {
        let err = parse_err("queues:\n  orders: { lease_ttl: 5s\n  users: {}\n");
        let ConfigError::Syntax { file, problem, position } = &err else {
            panic!("expected a syntax error, got {err:?}");
        };
        assert_eq!(file, FILE);
        assert_eq!(problem, "did not find expected ',' or '}', while parsing a flow mapping at line 2 column 11");
        assert_eq!(*position, Some(Position { line: 3, column: 8 }));
        assert_eq!(
            err.to_string(),
            "deploy/examples/bad.yaml: invalid YAML: did not find expected ',' or '}', \
             while parsing a flow mapping at line 2 column 11 (line 3, column 8)"
        );
    }

    #[test]
    fn field_manager_should_default_and_be_bounded() {
        let config = Config::parse("queues: { a: {} }\n", FILE).unwrap();
        assert_eq!(config.field_manager, DEFAULT_FIELD_MANAGER);
        let config = Config::parse("field_manager: users-controller\nqueues: { a: {} }\n", FILE).unwrap();
        assert_eq!(config.field_manager, "users-controller");
        let (field, problem, _) = field_err("field_manager: ''\nqueues: { a: {} }\n");
        assert_eq!((field.as_str(), problem.as_str()), ("field_manager", "must be 1 to 128 bytes, got 0"));
    }

    #[test]
    fn config_should_refuse_several_documents() {
        let err = parse_err("queues: { a: {} }\n---\nqueues: { b: {} }\n");
        assert!(matches!(err, ConfigError::Syntax { .. }), "{err:?}");
    }

    #[test]
    fn config_should_carry_the_queue_path_of_a_domain_validation_error() {
        let yaml = "queues:\n  orders:\n    rate_limiter:\n      exponential: { base: 1s, max: 5ms }\n";
        let err = parse_err(yaml);
        let ConfigError::Setting { file, path, source } = &err else {
            panic!("expected a setting error, got {err:?}");
        };
        assert_eq!(file, FILE);
        assert_eq!((path.as_str(), source.field.as_str()), ("queues.orders", "rate_limiter.exponential.max"));
        assert!(
            err.to_string().starts_with(
                "deploy/examples/bad.yaml: queues.orders.rate_limiter.exponential.max: must be at least base"
            ),
            "{err}"
        );
    }

    #[test]
    fn config_should_refuse_a_lease_ttl_above_its_maximum() {
        let err = parse_err("queues:\n  orders:\n    lease_ttl: 1h\n");
        assert_eq!(
            err.to_string().split_once(": must").map(|(head, _)| head.to_owned()),
            Some("deploy/examples/bad.yaml: queues.orders.max_lease_ttl".to_owned())
        );
    }

    #[test]
    fn load_should_name_a_missing_file() {
        let err = Config::load(Path::new("/nonexistent/wqs.yaml")).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
        assert!(err.to_string().starts_with("/nonexistent/wqs.yaml: cannot read the config file: "), "{err}");
    }

    #[test]
    fn load_should_read_the_standalone_example() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/examples/standalone.yaml");
        let config = Config::load(&path).unwrap();
        assert_eq!(config.queues[0].name, "default");
    }
}
