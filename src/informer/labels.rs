//! `Labels`: an object's labels, sorted by key, in one allocation.

use std::fmt;

/// An object's `metadata.labels`, sorted by key: each pair as its key's and
/// its value's lengths (`u32`, little-endian), then the key's and the
/// value's bytes. A cached object's labels are read by key (selectors,
/// indexes by label) and compared whole (the labels-changed predicate);
/// kept as a boxed slice of pairs of boxed strings they took three
/// allocations for one `app: web` (112 bytes as glibc allocates them) and
/// two more per further pair, where this takes one of 32 bytes.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Labels(Box<[u8]>);

/// The bytes before each pair's key and value: their two lengths.
const HEADER: usize = 8;

impl Labels {
    /// The labels of `pairs`; a key given twice keeps its last value.
    pub fn new<K: AsRef<str>, V: AsRef<str>>(pairs: impl IntoIterator<Item = (K, V)>) -> Labels {
        let mut pairs: Vec<(K, V)> = pairs.into_iter().collect();
        // Stable, so that of equal keys the last given stays last.
        pairs.sort_by(|(a, _), (b, _)| a.as_ref().cmp(b.as_ref()));
        let kept = || {
            pairs.iter().enumerate().filter_map(|(at, (key, value))| {
                let replaced = pairs.get(at + 1).is_some_and(|(next, _)| next.as_ref() == key.as_ref());
                (!replaced).then(|| (key.as_ref(), value.as_ref()))
            })
        };
        let size = kept().map(|(key, value)| HEADER + key.len() + value.len()).sum();
        let mut bytes = Vec::with_capacity(size);
        for (key, value) in kept() {
            bytes.extend_from_slice(&length(key).to_le_bytes());
            bytes.extend_from_slice(&length(value).to_le_bytes());
            bytes.extend_from_slice(key.as_bytes());
            bytes.extend_from_slice(value.as_bytes());
        }
        Labels(bytes.into_boxed_slice())
    }

    /// The value of label `key`, if the object has it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.iter().take_while(|(k, _)| *k <= key).find(|(k, _)| *k == key).map(|(_, value)| value)
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        let mut rest = &self.0[..];
        std::iter::from_fn(move || {
            if rest.is_empty() {
                return None;
            }
            let (key_len, value_len) = (read_length(&rest[..4]), read_length(&rest[4..HEADER]));
            let (key, after) = rest[HEADER..].split_at(key_len);
            let (value, after) = after.split_at(value_len);
            rest = after;
            Some((text(key), text(value)))
        })
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

fn length(text: &str) -> u32 {
    // A label's key is at most 317 bytes and its value 63 (the API server
    // refuses longer ones); an object of 4 GiB is not one the server sends.
    u32::try_from(text.len()).expect("a label is shorter than 4 GiB")
}

fn read_length(bytes: &[u8]) -> usize {
    let bytes: [u8; 4] = bytes.try_into().expect("a length is 4 bytes");
    u32::from_le_bytes(bytes) as usize
}

/// Bytes `Labels::new` copied from a `&str`, at the boundaries it wrote.
fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("labels hold the UTF-8 they were given")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_should_read_back_sorted_by_key_whatever_order_they_came_in() {
        let labels = Labels::new([("b", "2"), ("a", "1"), ("app.kubernetes.io/name", "web")]);
        let pairs: Vec<(&str, &str)> = labels.iter().collect();
        assert_eq!(pairs, [("a", "1"), ("app.kubernetes.io/name", "web"), ("b", "2")]);
        assert_eq!(labels.get("b"), Some("2"));
        assert_eq!(labels.get("app.kubernetes.io/name"), Some("web"));
        assert_eq!(labels.get("c"), None);
        assert_eq!(labels.get(""), None);
    }

    #[test]
    fn equal_label_sets_should_compare_equal_whatever_their_order() {
        assert_eq!(Labels::new([("a", "1"), ("b", "2")]), Labels::new([("b", "2"), ("a", "1")]));
        assert_ne!(Labels::new([("a", "1")]), Labels::new([("a", "2")]));
        assert_ne!(Labels::new([("a", "1")]), Labels::new([("a", "1"), ("b", "")]));
    }

    #[test]
    fn empty_keys_and_values_and_any_characters_should_survive() {
        let labels = Labels::new([("", ""), ("k\\", "v\n"), ("é", "\0"), ("x", "")]);
        assert_eq!(labels.get(""), Some(""));
        assert_eq!(labels.get("k\\"), Some("v\n"));
        assert_eq!(labels.get("é"), Some("\0"));
        assert_eq!(labels.get("x"), Some(""));
        assert_eq!(labels.iter().count(), 4);
    }

    #[test]
    fn a_key_given_twice_should_keep_its_last_value() {
        let labels = Labels::new([("a", "1"), ("b", "2"), ("a", "3")]);
        assert_eq!(labels.iter().collect::<Vec<_>>(), [("a", "3"), ("b", "2")]);
    }

    #[test]
    fn no_labels_should_allocate_nothing() {
        let labels = Labels::new(Vec::<(String, String)>::new());
        assert!(labels.is_empty());
        assert_eq!(labels, Labels::default());
        assert_eq!(labels.iter().count(), 0);
    }

    #[test]
    fn one_short_label_should_take_one_allocation_of_its_bytes() {
        // 8 bytes of lengths and 13 of text: one 32-byte chunk for glibc.
        assert_eq!(Labels::new([("bench", "informer")]).0.len(), 21);
    }
}
