use std::collections::BTreeMap;

use prost::Message;

use super::{MapEntry, SmallMap};

#[derive(Clone, PartialEq, Message)]
struct Value {
    #[prost(uint32, tag = "1")]
    n: u32,
    #[prost(string, tag = "2")]
    s: String,
}

/// The field as prost generates a proto map.
#[derive(Clone, PartialEq, Message)]
struct AsBTree {
    #[prost(uint32, tag = "1")]
    before: u32,
    #[prost(btree_map = "string, message", tag = "3")]
    m: BTreeMap<String, Value>,
    #[prost(uint32, tag = "4")]
    after: u32,
}

/// The same field as caravan-proto's build holds it.
#[derive(Clone, PartialEq, Message)]
struct AsSmall {
    #[prost(uint32, tag = "1")]
    before: u32,
    #[prost(message, repeated, tag = "3")]
    m: SmallMap<Value>,
    #[prost(uint32, tag = "4")]
    after: u32,
}

fn value(n: u32, s: &str) -> Value {
    Value { n, s: s.into() }
}

fn cases() -> Vec<Vec<(String, Value)>> {
    vec![
        vec![],
        vec![("web".into(), value(250, "running"))],
        // A default key and a default value are left out of the entry.
        vec![("".into(), value(1, "")), ("x".into(), Value::default())],
        vec![
            ("c".into(), value(3, "three")),
            ("a".into(), value(1, "one")),
            ("b".into(), value(2, "two")),
        ],
    ]
}

#[test]
fn encodes_byte_for_byte_as_a_btree_map_and_each_reads_the_other() {
    for pairs in cases() {
        let tree = AsBTree {
            before: 7,
            m: pairs.iter().cloned().collect(),
            after: 9,
        };
        let small = AsSmall {
            before: 7,
            m: pairs.iter().cloned().collect(),
            after: 9,
        };
        let bytes = tree.encode_to_vec();
        assert_eq!(small.encode_to_vec(), bytes, "{pairs:?}");
        assert_eq!(small.encoded_len(), bytes.len());

        let read = AsSmall::decode(bytes.as_slice()).unwrap();
        assert_eq!(read, small);
        assert_eq!(read.m.len(), pairs.len());
        for (k, v) in &pairs {
            assert_eq!(read.m.get(k), Some(v));
        }
        let back = AsBTree::decode(small.encode_to_vec().as_slice()).unwrap();
        assert_eq!(back, tree);
    }
}

/// Bytes of a map another encoder wrote out of order, with `b` twice.
fn unsorted_with_a_repeat() -> Vec<u8> {
    let mut raw = AsSmall::default();
    for (k, n) in [("b", 1), ("a", 2), ("b", 3)] {
        raw.m.push(MapEntry {
            key: k.into(),
            value: value(n, ""),
        });
    }
    raw.encode_to_vec()
}

#[test]
fn a_key_written_twice_counts_once_with_its_last_value() {
    let bytes = unsorted_with_a_repeat();
    let tree = AsBTree::decode(bytes.as_slice()).unwrap();
    let small = AsSmall::decode(bytes.as_slice()).unwrap();

    assert_eq!(small.m.len(), 2);
    assert_eq!(small.m.get("b"), Some(&value(3, "")));
    assert_eq!(small.m.get("a"), Some(&value(2, "")));
    let pairs: Vec<_> = small.m.iter().map(|(k, v)| (k.clone(), v.n)).collect();
    assert_eq!(pairs, [("a".into(), 2), ("b".into(), 3)]);
    assert_eq!(
        small.m,
        tree.m.clone().into(),
        "equal to the map prost decodes"
    );

    // The first change sorts the entries and drops the shadowed one.
    let mut changed = small.m.clone();
    changed.insert("c".into(), value(4, ""));
    let keys: Vec<_> = changed.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["a", "b", "c"]);
    assert_eq!(changed["b"], value(3, ""));
}

#[test]
fn changes_keep_the_entries_sorted_and_exactly_sized() {
    let mut m = SmallMap::new();
    assert!(m.is_empty());
    assert_eq!(m.insert("web".into(), value(1, "")), None);
    assert_eq!(m.entries.capacity(), 1, "one entry, room for one");
    assert_eq!(m.insert("api".into(), value(2, "")), None);
    assert_eq!(
        m.insert("web".into(), value(3, "")),
        Some(value(1, "")),
        "a key set again replaces its value"
    );
    m.get_or_insert_with("db", || value(4, "")).s.push('x');
    m.get_or_insert_with("db", || unreachable!("present")).n += 1;
    let pairs: Vec<_> = m.iter().map(|(k, v)| (k.as_str(), v.n)).collect();
    assert_eq!(pairs, [("api", 2), ("db", 5), ("web", 3)]);
    assert_eq!(m.get("db").unwrap().s, "x");

    assert_eq!(m.remove("api"), Some(value(2, "")));
    assert_eq!(m.remove("api"), None);
    m.retain(|k, _| k != "db");
    assert_eq!(m.keys().collect::<Vec<_>>(), ["web"]);
    assert!(m.contains_key("web") && !m.contains_key("db"));
    for v in m.values_mut() {
        v.n = 10;
    }
    assert_eq!(
        m.into_iter().collect::<Vec<_>>(),
        [("web".into(), value(10, ""))]
    );
}

#[test]
fn a_decoded_map_gives_back_its_spare_room_and_reads_alike() {
    let mut small = AsSmall::decode(unsorted_with_a_repeat().as_slice()).unwrap();
    let before = small.m.clone();
    small.m.shrink();
    assert_eq!(small.m.entries.capacity(), 2);
    assert_eq!(small.m, before);
    assert_eq!(
        format!("{:?}", small.m),
        r#"{"a": Value { n: 2, s: "" }, "b": Value { n: 3, s: "" }}"#
    );
}
