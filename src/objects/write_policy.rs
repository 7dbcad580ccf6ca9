//! What workers may write through the sidecar: the config's declared writes, everything else refused before the request's body is read.
//!
//! The sidecar holds the service account's power; a worker gets only the
//! part of it the config declares: a kind (by group, any version), the
//! calls (apply, patch, create, delete), the namespaces, and whether the
//! write must be made under a current lease (the default). The Leases the
//! sidecar itself keeps (leader election, shard membership) are never
//! writable, whatever is declared.

use std::fmt;

use super::KindRef;

/// One of ObjectService's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WriteVerb {
    Apply,
    Patch,
    Create,
    Delete,
}

impl WriteVerb {
    pub const ALL: [WriteVerb; 4] = [WriteVerb::Apply, WriteVerb::Patch, WriteVerb::Create, WriteVerb::Delete];

    pub fn as_str(self) -> &'static str {
        match self {
            WriteVerb::Apply => "apply",
            WriteVerb::Patch => "patch",
            WriteVerb::Create => "create",
            WriteVerb::Delete => "delete",
        }
    }
}

impl fmt::Display for WriteVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One declared write: `writes[i]` in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRule {
    /// The API group; empty for the core group.
    pub group: String,
    pub kind: String,
    /// The calls allowed; never empty.
    pub verbs: Vec<WriteVerb>,
    /// The namespaces allowed; `None`: any namespace, and cluster-scoped objects.
    pub namespaces: Option<Vec<String>>,
    /// Whether the write must name a current lease (the default).
    pub lease_required: bool,
}

impl WriteRule {
    fn covers(&self, verb: WriteVerb, kind: &KindRef, namespace: Option<&str>) -> bool {
        self.group == kind.group
            && self.kind == kind.kind
            && self.verbs.contains(&verb)
            && match (&self.namespaces, namespace) {
                (None, _) => true,
                (Some(allowed), Some(namespace)) => allowed.iter().any(|a| a == namespace),
                (Some(_), None) => false,
            }
    }

    /// The kind as people write it: `Namespace`, `apps/Deployment`.
    fn kind_text(&self) -> String {
        kind_text(&self.group, &self.kind)
    }
}

/// One declared write as `--check-config` shows it.
impl fmt::Display for WriteRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verbs: Vec<&str> = self.verbs.iter().map(|verb| verb.as_str()).collect();
        write!(f, "{}: {} in ", self.kind_text(), verbs.join(", "))?;
        match &self.namespaces {
            None => f.write_str("any namespace or cluster-wide")?,
            Some(namespaces) => write!(f, "namespaces {}", namespaces.join(", "))?,
        }
        f.write_str(if self.lease_required { ", under a lease" } else { ", with or without a lease" })
    }
}

fn kind_text(group: &str, kind: &str) -> String {
    if group.is_empty() { kind.to_owned() } else { format!("{group}/{kind}") }
}

/// The declared writes, and the namespace of the sidecar's own Leases.
#[derive(Debug, Clone, Default)]
pub struct WritePolicy {
    rules: Vec<WriteRule>,
    /// Where the sidecar keeps its election or shard Leases (none without either).
    own_leases: Option<String>,
}

/// Why a write was refused: it is not declared, or only under a lease, or
/// it would touch the sidecar's own Leases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteDenied {
    #[error("{verb} of {kind}{place} is not among the config's declared writes (`writes:`); declare it to allow it")]
    NotDeclared { verb: WriteVerb, kind: String, place: String },
    #[error(
        "{verb} of {kind}{place} is declared only under a lease (writes[{rule}], `lease: required`): name the lease it is made under"
    )]
    NeedsLease { verb: WriteVerb, kind: String, place: String, rule: usize },
    #[error(
        "{verb} of a Lease in {namespace}: the sidecar keeps its own election and shard Leases there, and no worker may write them"
    )]
    OwnLeases { verb: WriteVerb, namespace: String },
}

impl WritePolicy {
    /// `rules` as declared; `own_leases` is the namespace of the sidecar's
    /// election or shard Leases, when it keeps any.
    pub fn new(rules: Vec<WriteRule>, own_leases: Option<String>) -> Self {
        WritePolicy { rules, own_leases }
    }

    pub fn rules(&self) -> &[WriteRule] {
        &self.rules
    }

    /// Whether a `verb` of `kind` in `namespace` (`None`: cluster-scoped, or
    /// a create whose namespace is the object's) may be made, `under_lease` or not.
    pub fn check(
        &self,
        verb: WriteVerb,
        kind: &KindRef,
        namespace: Option<&str>,
        under_lease: bool,
    ) -> Result<(), WriteDenied> {
        if kind.group == "coordination.k8s.io"
            && kind.kind == "Lease"
            && let (Some(own), Some(namespace)) = (&self.own_leases, namespace)
            && own == namespace
        {
            return Err(WriteDenied::OwnLeases { verb, namespace: namespace.to_owned() });
        }
        let place = match namespace {
            Some(namespace) => format!(" in namespace {namespace}"),
            None => String::new(),
        };
        let mut covering = self.rules.iter().enumerate().filter(|(_, rule)| rule.covers(verb, kind, namespace));
        let kind = || kind_text(&kind.group, &kind.kind);
        match covering.clone().find(|(_, rule)| under_lease || !rule.lease_required) {
            Some(_) => Ok(()),
            None => match covering.next() {
                Some((rule, _)) => Err(WriteDenied::NeedsLease { verb, kind: kind(), place, rule }),
                None => Err(WriteDenied::NotDeclared { verb, kind: kind(), place }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(api_version: &str, kind: &str) -> KindRef {
        KindRef::parse(api_version, kind).unwrap()
    }

    fn rule(group: &str, kind: &str, verbs: &[WriteVerb], namespaces: Option<&[&str]>, lease: bool) -> WriteRule {
        WriteRule {
            group: group.into(),
            kind: kind.into(),
            verbs: verbs.to_vec(),
            namespaces: namespaces.map(|n| n.iter().map(|s| s.to_string()).collect()),
            lease_required: lease,
        }
    }

    #[test]
    fn a_rule_should_read_in_check_config_as_it_was_declared() {
        let any = rule("apps", "Deployment", &[WriteVerb::Apply, WriteVerb::Delete], None, true);
        assert_eq!(any.to_string(), "apps/Deployment: apply, delete in any namespace or cluster-wide, under a lease");
        let some = rule("", "ConfigMap", &[WriteVerb::Patch], Some(&["a", "b"]), false);
        assert_eq!(some.to_string(), "ConfigMap: patch in namespaces a, b, with or without a lease");
    }

    #[test]
    fn nothing_declared_should_refuse_every_write() {
        let policy = WritePolicy::default();
        let denied = policy.check(WriteVerb::Apply, &kind("v1", "ConfigMap"), Some("default"), true).unwrap_err();
        assert!(matches!(denied, WriteDenied::NotDeclared { .. }), "{denied:?}");
        assert!(denied.to_string().contains("apply of ConfigMap in namespace default is not among"), "{denied}");
    }

    #[test]
    fn a_declared_write_should_pass_only_for_its_group_kind_verbs_and_namespaces() {
        let policy = WritePolicy::new(
            vec![rule("apps", "Deployment", &[WriteVerb::Apply, WriteVerb::Patch], Some(&["team-a"]), false)],
            None,
        );
        let deployment = kind("apps/v1", "Deployment");
        assert_eq!(policy.check(WriteVerb::Apply, &deployment, Some("team-a"), false), Ok(()));
        assert_eq!(policy.check(WriteVerb::Patch, &kind("apps/v1beta2", "Deployment"), Some("team-a"), false), Ok(()));
        assert!(policy.check(WriteVerb::Delete, &deployment, Some("team-a"), false).is_err(), "verb");
        assert!(policy.check(WriteVerb::Apply, &deployment, Some("team-b"), false).is_err(), "namespace");
        assert!(policy.check(WriteVerb::Apply, &deployment, None, false).is_err(), "cluster-scoped");
        assert!(policy.check(WriteVerb::Apply, &kind("v1", "Deployment"), Some("team-a"), false).is_err(), "group");
        assert!(policy.check(WriteVerb::Apply, &kind("apps/v1", "StatefulSet"), Some("team-a"), false).is_err());
    }

    #[test]
    fn a_write_declared_under_a_lease_should_need_one_unless_another_rule_allows_it_without() {
        let namespace = kind("v1", "Namespace");
        let policy = WritePolicy::new(vec![rule("", "Namespace", &WriteVerb::ALL, None, true)], None);
        assert_eq!(policy.check(WriteVerb::Create, &namespace, None, true), Ok(()));
        let denied = policy.check(WriteVerb::Create, &namespace, None, false).unwrap_err();
        assert!(matches!(denied, WriteDenied::NeedsLease { rule: 0, .. }), "{denied:?}");
        let both = WritePolicy::new(
            vec![
                rule("", "Namespace", &WriteVerb::ALL, None, true),
                rule("", "Namespace", &[WriteVerb::Delete], None, false),
            ],
            None,
        );
        assert_eq!(both.check(WriteVerb::Delete, &namespace, None, false), Ok(()));
        assert!(both.check(WriteVerb::Create, &namespace, None, false).is_err());
    }

    #[test]
    fn the_sidecars_own_leases_should_never_be_writable_even_when_declared() {
        let lease = kind("coordination.k8s.io/v1", "Lease");
        let policy = WritePolicy::new(
            vec![rule("coordination.k8s.io", "Lease", &WriteVerb::ALL, None, false)],
            Some("controllers".into()),
        );
        let denied = policy.check(WriteVerb::Patch, &lease, Some("controllers"), true).unwrap_err();
        assert!(matches!(denied, WriteDenied::OwnLeases { .. }), "{denied:?}");
        assert_eq!(policy.check(WriteVerb::Patch, &lease, Some("elsewhere"), true), Ok(()));
    }
}
