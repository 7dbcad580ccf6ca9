//! `writes:`, what workers may write through the sidecar: read and checked into the objects module's rules.

use serde::Deserialize;

use crate::k8s_names::{is_dns_label, is_dns_subdomain};
use crate::objects::{WriteRule, WriteVerb};

/// One entry of `writes:` as read.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WriteDoc {
    /// The API group; left out or empty: the core group.
    #[serde(default)]
    group: String,
    kind: String,
    /// Left out: all four.
    #[serde(default)]
    verbs: Option<Vec<VerbDoc>>,
    /// Left out: any namespace, and cluster-scoped objects.
    #[serde(default)]
    namespaces: Option<Vec<String>>,
    /// Left out: `required`.
    #[serde(default)]
    lease: Option<LeaseDoc>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum VerbDoc {
    Apply,
    Patch,
    Create,
    Delete,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum LeaseDoc {
    Required,
    Optional,
}

impl WriteDoc {
    /// The rule, or the field (relative to the entry) and what is wrong with it.
    pub(super) fn rule(self) -> Result<WriteRule, (&'static str, String)> {
        if self.kind.is_empty() || !self.kind.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(("kind", format!("{:?} is not a kind (e.g. ConfigMap)", self.kind)));
        }
        if !self.group.is_empty() && !is_dns_subdomain(&self.group) {
            return Err(("group", format!("{:?} is not an API group (e.g. apps, example.com)", self.group)));
        }
        let verbs = match self.verbs {
            None => WriteVerb::ALL.to_vec(),
            Some(verbs) if verbs.is_empty() => {
                return Err(("verbs", "is empty: leave it out for all of apply, patch, create, delete".to_owned()));
            }
            Some(verbs) => {
                let mut verbs: Vec<WriteVerb> = verbs.into_iter().map(WriteVerb::from).collect();
                verbs.sort();
                verbs.dedup();
                verbs
            }
        };
        if let Some(namespaces) = &self.namespaces {
            if namespaces.is_empty() {
                return Err(("namespaces", "is empty: leave it out for any namespace".to_owned()));
            }
            if let Some(bad) = namespaces.iter().find(|namespace| !is_dns_label(namespace)) {
                return Err(("namespaces", format!("{bad:?} is not a namespace name (a DNS label)")));
            }
        }
        Ok(WriteRule {
            group: self.group,
            kind: self.kind,
            verbs,
            namespaces: self.namespaces,
            lease_required: !matches!(self.lease, Some(LeaseDoc::Optional)),
        })
    }
}

impl From<VerbDoc> for WriteVerb {
    fn from(verb: VerbDoc) -> Self {
        match verb {
            VerbDoc::Apply => WriteVerb::Apply,
            VerbDoc::Patch => WriteVerb::Patch,
            VerbDoc::Create => WriteVerb::Create,
            VerbDoc::Delete => WriteVerb::Delete,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::objects::{WriteRule, WriteVerb};

    const INFORMERS: &str = "informers:\n  cms: { version: v1, kind: ConfigMap }\nqueues:\n  q: {}\n";

    fn parse(writes: &str) -> Result<Config, String> {
        Config::parse(&format!("{INFORMERS}writes:\n{writes}"), "c.yaml").map_err(|err| err.to_string())
    }

    #[test]
    fn a_declared_write_should_default_to_every_verb_any_namespace_and_a_lease() {
        let config = parse("  - { group: apps, kind: Deployment }\n").unwrap();
        assert_eq!(
            config.writes,
            vec![WriteRule {
                group: "apps".into(),
                kind: "Deployment".into(),
                verbs: WriteVerb::ALL.to_vec(),
                namespaces: None,
                lease_required: true,
            }]
        );
        let narrow =
            parse("  - { kind: ConfigMap, verbs: [patch, apply, patch], namespaces: [a], lease: optional }\n").unwrap();
        let rule = &narrow.writes[0];
        assert_eq!((rule.group.as_str(), rule.verbs.as_slice()), ("", &[WriteVerb::Apply, WriteVerb::Patch][..]));
        assert_eq!((rule.namespaces.as_deref(), rule.lease_required), (Some(&["a".to_string()][..]), false));
    }

    #[test]
    fn no_writes_should_declare_nothing() {
        assert!(Config::parse(INFORMERS, "c.yaml").unwrap().writes.is_empty());
    }

    #[test]
    fn a_bad_declaration_should_be_refused_naming_its_field() {
        for (writes, expected) in [
            ("  - { kind: ConfigMap, verbs: [update] }\n", "writes[0].verbs"),
            ("  - { kind: ConfigMap, verbs: [] }\n", "writes[0].verbs: is empty"),
            ("  - { kind: ConfigMap, namespaces: [Not_A_Label] }\n", "writes[0].namespaces: \"Not_A_Label\""),
            ("  - { kind: ConfigMap, namespaces: [] }\n", "writes[0].namespaces: is empty"),
            ("  - { kind: ConfigMap }\n  - { kind: \"\" }\n", "writes[1].kind"),
            ("  - { group: \"a b\", kind: X }\n", "writes[0].group"),
            ("  - { kind: ConfigMap, lease: sometimes }\n", "writes[0].lease"),
            ("  - { kind: ConfigMap, namespace: a }\n", "unknown field `namespace`"),
        ] {
            let err = parse(writes).unwrap_err();
            assert!(err.contains(expected), "{writes:?}: {err}");
        }
    }

    #[test]
    fn writes_without_informers_should_be_refused() {
        let err = Config::parse("queues:\n  q: {}\nwrites:\n  - { kind: ConfigMap }\n", "c.yaml").unwrap_err();
        assert!(err.to_string().contains("writes: declares writes, but without informers"), "{err}");
    }
}
