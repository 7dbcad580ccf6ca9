//! The object store of one informer: objects by key in namespace/name order, secondary indexes, tombstones.
//!
//! One writer (the informer's watch task) and many readers (the Cache
//! service, the keying of other informers' triggers), behind the informer's
//! lock. Objects are shared as `Arc`s, so a read copies no JSON.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use tokio::time::Instant;

use super::object::CachedObject;
use super::selector::LabelSelector;
use super::spec::IndexSpec;
use super::tombstone::Tombstones;

/// A store key (`namespace/name` or `name`), ordered by namespace, then name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjKey(pub Arc<str>);

impl ObjKey {
    /// (namespace, name); namespace and name never contain '/'.
    fn parts(&self) -> (&str, &str) {
        self.0.split_once('/').unwrap_or(("", &self.0))
    }
}

impl Ord for ObjKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.parts().cmp(&other.parts())
    }
}

impl PartialOrd for ObjKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

struct Slot {
    object: Arc<CachedObject>,
    /// The list this object was last seen in; a relist drops objects of older epochs.
    epoch: u64,
}

/// One index: value -> keys filed under it.
struct Index {
    name: String,
    entries: HashMap<Box<str>, BTreeSet<ObjKey>>,
}

/// What a list reads: filters combine with AND.
#[derive(Debug, Default)]
pub struct ListQuery<'a> {
    pub namespace: Option<&'a str>,
    pub selector: Option<&'a LabelSelector>,
    /// (index name, value); the index must exist.
    pub index: Option<(&'a str, &'a str)>,
    /// Start after this key (a page token).
    pub after: Option<&'a str>,
    pub limit: usize,
}

/// One page of a list, and the key to continue after when more match.
pub struct Page {
    pub objects: Vec<Arc<CachedObject>>,
    pub next_after: Option<Arc<str>>,
}

pub struct Store {
    objects: BTreeMap<ObjKey, Slot>,
    indexes: Vec<Index>,
    tombstones: Tombstones,
    epoch: u64,
}

impl Store {
    pub fn new(indexes: &[IndexSpec]) -> Self {
        Store {
            objects: BTreeMap::new(),
            indexes: indexes.iter().map(|i| Index { name: i.name.clone(), entries: HashMap::new() }).collect(),
            tombstones: Tombstones::default(),
            epoch: 0,
        }
    }

    /// Stores `object`, replacing the same key; returns the previous state.
    pub fn apply(&mut self, object: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        let key = ObjKey(object.key.clone());
        self.tombstones.remove(&object.key);
        self.file(&key, &object);
        let old = self.objects.insert(key.clone(), Slot { object, epoch: self.epoch }).map(|s| s.object);
        if let Some(old) = &old {
            self.unfile(&key, old, true);
        }
        old
    }

    /// Removes the key, keeping `last` (the state the server sent with the
    /// delete) as its tombstone; returns the state the store held.
    pub fn delete(&mut self, last: Arc<CachedObject>, now: Instant) -> Option<Arc<CachedObject>> {
        let key = ObjKey(last.key.clone());
        let old = self.objects.remove(&key).map(|s| s.object);
        if let Some(old) = &old {
            self.unfile(&key, old, false);
        }
        self.tombstones.insert(last, now);
        old
    }

    /// A relist starts: objects it does not list again are deleted at its end.
    pub fn begin_relist(&mut self) {
        self.epoch += 1;
    }

    /// A relist ended: removes (and tombstones) every object it did not list.
    pub fn end_relist(&mut self, now: Instant) -> Vec<Arc<CachedObject>> {
        let epoch = self.epoch;
        self.remove_where(|slot| slot.epoch != epoch, now)
    }

    /// Removes (and tombstones) every object `keep` rejects; returns them.
    pub fn retain(&mut self, mut keep: impl FnMut(&CachedObject) -> bool, now: Instant) -> Vec<Arc<CachedObject>> {
        self.remove_where(|slot| !keep(&slot.object), now)
    }

    fn remove_where(&mut self, mut remove: impl FnMut(&Slot) -> bool, now: Instant) -> Vec<Arc<CachedObject>> {
        let gone: Vec<ObjKey> = self.objects.iter().filter(|(_, s)| remove(s)).map(|(k, _)| k.clone()).collect();
        let mut removed = Vec::with_capacity(gone.len());
        for key in gone {
            if let Some(slot) = self.objects.remove(&key) {
                self.unfile(&key, &slot.object, false);
                self.tombstones.insert(slot.object.clone(), now);
                removed.push(slot.object);
            }
        }
        removed
    }

    pub fn get(&self, key: &str) -> Option<Arc<CachedObject>> {
        self.objects.get(&ObjKey(Arc::from(key))).map(|s| s.object.clone())
    }

    /// The last known state of a deleted key, while its tombstone lasts.
    pub fn get_deleted(&self, key: &str, now: Instant) -> Option<Arc<CachedObject>> {
        self.tombstones.get(key, now)
    }

    pub fn has_index(&self, name: &str) -> bool {
        self.indexes.iter().any(|i| i.name == name)
    }

    /// Keys filed under `value` in index `name`; `None` when there is no such index.
    pub fn index_keys(&self, name: &str, value: &str) -> Option<Vec<Arc<str>>> {
        let index = self.indexes.iter().find(|i| i.name == name)?;
        Some(index.entries.get(value).map(|keys| keys.iter().map(|k| k.0.clone()).collect()).unwrap_or_default())
    }

    /// Every key, for a resync.
    pub fn keys(&self) -> Vec<Arc<str>> {
        self.objects.keys().map(|k| k.0.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn tombstone_count(&self) -> usize {
        self.tombstones.len()
    }

    /// One page of the objects matching `query`, in namespace/name order.
    /// Panics on an unknown index: callers check with `has_index` first.
    pub fn list(&self, query: &ListQuery<'_>) -> Page {
        let limit = query.limit.max(1);
        let after = query.after.map(|a| ObjKey(Arc::from(a)));
        let matches = |key: &ObjKey, object: &CachedObject| {
            query.namespace.is_none_or(|ns| key.parts().0 == ns)
                && query.selector.is_none_or(|s| s.matches(&object.meta))
                && after.as_ref().is_none_or(|a| key > a)
        };
        let mut objects = Vec::new();
        let mut more = false;
        let mut push = |key: &ObjKey, object: &Arc<CachedObject>| {
            if !matches(key, object) {
                return true;
            }
            if objects.len() == limit {
                more = true;
                return false;
            }
            objects.push(object.clone());
            true
        };
        if let Some((name, value)) = query.index {
            let index = self.indexes.iter().find(|i| i.name == name).expect("index checked by the caller");
            if let Some(keys) = index.entries.get(value) {
                let start = after.as_ref().map_or(Bound::Unbounded, Bound::Excluded);
                for key in keys.range((start, Bound::Unbounded)) {
                    if let Some(slot) = self.objects.get(key)
                        && !push(key, &slot.object)
                    {
                        break;
                    }
                }
            }
        } else {
            let start = match (&after, query.namespace) {
                (Some(a), _) => Bound::Excluded(a.clone()),
                // "ns/" sorts as (ns, ""), before every name in ns.
                (None, Some(ns)) if !ns.is_empty() => Bound::Included(ObjKey(Arc::from(format!("{ns}/")))),
                (None, _) => Bound::Unbounded,
            };
            for (key, slot) in self.objects.range((start, Bound::Unbounded)) {
                if query.namespace.is_some_and(|ns| !ns.is_empty() && key.parts().0 > ns) {
                    break;
                }
                if !push(key, &slot.object) {
                    break;
                }
            }
        }
        let next_after = if more { objects.last().map(|o| o.key.clone()) } else { None };
        Page { objects, next_after }
    }

    fn file(&mut self, key: &ObjKey, object: &CachedObject) {
        for (index, values) in self.indexes.iter_mut().zip(object.index_values.per_index()) {
            for value in values.iter() {
                index.entries.entry(value.clone()).or_default().insert(key.clone());
            }
        }
    }

    /// Takes `key` out of the index entries of `old`; with `keep_current`,
    /// values the key is still filed under (by its new state) stay.
    fn unfile(&mut self, key: &ObjKey, old: &CachedObject, keep_current: bool) {
        let current = if keep_current { self.objects.get(key).map(|s| s.object.clone()) } else { None };
        for (i, (index, values)) in self.indexes.iter_mut().zip(old.index_values.per_index()).enumerate() {
            for value in values.iter() {
                if current.as_ref().is_some_and(|c| c.index_values.per_index()[i].contains(value)) {
                    continue;
                }
                if let Some(keys) = index.entries.get_mut(value) {
                    keys.remove(key);
                    if keys.is_empty() {
                        index.entries.remove(value);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::informer::object::{IndexValues, Meta};
    use crate::informer::spec::IndexBy;

    fn object(namespace: &str, name: &str, labels: &[(&str, &str)], owner: &[&str]) -> Arc<CachedObject> {
        let key: Arc<str> = if namespace.is_empty() { name.into() } else { format!("{namespace}/{name}").into() };
        let mut meta = Meta::default();
        meta.labels = crate::informer::labels::Labels::new(labels.iter().copied());
        Arc::new(CachedObject {
            key,
            meta,
            json: Box::from(&b"{}"[..]),
            index_values: IndexValues::new(vec![owner.iter().map(|o| Box::<str>::from(*o)).collect()]),
        })
    }

    fn store() -> Store {
        Store::new(&[IndexSpec { name: "owner".into(), by: IndexBy::Owner }])
    }

    fn keys(page: &Page) -> Vec<&str> {
        page.objects.iter().map(|o| &*o.key).collect()
    }

    #[test]
    fn list_should_order_by_namespace_then_name_and_page() {
        let mut s = store();
        for (ns, name) in [("a-b", "x"), ("a", "y"), ("a", "x"), ("b", "z")] {
            s.apply(object(ns, name, &[], &[]));
        }
        let all = s.list(&ListQuery { limit: 10, ..Default::default() });
        assert_eq!(keys(&all), ["a/x", "a/y", "a-b/x", "b/z"]);
        assert!(all.next_after.is_none());
        let first = s.list(&ListQuery { limit: 2, ..Default::default() });
        assert_eq!(keys(&first), ["a/x", "a/y"]);
        let after = first.next_after.unwrap();
        let second = s.list(&ListQuery { limit: 2, after: Some(&after), ..Default::default() });
        assert_eq!(keys(&second), ["a-b/x", "b/z"]);
        assert!(second.next_after.is_none());
        let in_a = s.list(&ListQuery { namespace: Some("a"), limit: 10, ..Default::default() });
        assert_eq!(keys(&in_a), ["a/x", "a/y"]);
    }

    #[test]
    fn list_should_filter_by_label_selector_and_index() {
        let mut s = store();
        s.apply(object("n", "a", &[("app", "web")], &["u1"]));
        s.apply(object("n", "b", &[("app", "db")], &["u1", "u2"]));
        s.apply(object("m", "c", &[("app", "web")], &["u2"]));
        let web = LabelSelector::parse("app=web").unwrap();
        assert_eq!(keys(&s.list(&ListQuery { selector: Some(&web), limit: 10, ..Default::default() })), ["m/c", "n/a"]);
        let by_u2 = s.list(&ListQuery { index: Some(("owner", "u2")), limit: 10, ..Default::default() });
        assert_eq!(keys(&by_u2), ["m/c", "n/b"]);
        let both =
            s.list(&ListQuery { index: Some(("owner", "u2")), selector: Some(&web), limit: 10, ..Default::default() });
        assert_eq!(keys(&both), ["m/c"]);
        assert_eq!(s.index_keys("owner", "u1").unwrap().len(), 2);
        assert!(s.index_keys("nope", "u1").is_none());
    }

    #[test]
    fn updates_and_deletes_should_keep_indexes_exact() {
        let mut s = store();
        s.apply(object("n", "a", &[], &["u1"]));
        s.apply(object("n", "a", &[], &["u2"]));
        assert_eq!(s.index_keys("owner", "u1").unwrap(), Vec::<Arc<str>>::new());
        assert_eq!(s.index_keys("owner", "u2").unwrap().len(), 1);
        s.delete(object("n", "a", &[], &["u2"]), Instant::now());
        assert!(s.index_keys("owner", "u2").unwrap().is_empty());
        assert!(s.get("n/a").is_none());
        assert!(s.get_deleted("n/a", Instant::now()).is_some());
    }

    #[test]
    fn a_relist_should_delete_what_it_did_not_list_again() {
        let mut s = store();
        s.apply(object("", "a", &[], &[]));
        s.apply(object("", "b", &[], &[]));
        s.begin_relist();
        s.apply(object("", "b", &[], &[]));
        let deleted = s.end_relist(Instant::now());
        assert_eq!(deleted.iter().map(|o| &*o.key).collect::<Vec<_>>(), ["a"]);
        assert_eq!(s.keys(), vec![Arc::<str>::from("b")]);
        assert!(s.get_deleted("a", Instant::now()).is_some());
    }
}
