//! An allocation record's name and namespace stored as a number where they
//! follow from the rest of the record (docs/state-layout.md, "Values"):
//! Caravan names an allocation `<job>.<group>[<index>]`, and most live in
//! the `default` namespace, so the two strings (about 25 bytes of a
//! record) become one field of three or four bytes. Only a name that reads
//! back exactly as written is packed; any other is stored as written.

use caravan_model::{alloc_name, trailing_alloc_index};
use caravan_proto::Allocation;

/// The stored form's field of packed names (reserved in alloc.proto's
/// `Allocation`).
pub(crate) const PACKED_NAMES: u32 = 39;

/// Field numbers of `Allocation` the packing leaves out (alloc.proto).
const NAME: u32 = 2;
const NAMESPACE: u32 = 3;

const DEFAULT_NAMESPACE: &str = "default";

/// The bit of a packed value saying the namespace is `default`; the bits
/// above it hold the name's index plus one (0: the name is stored as
/// written).
const DEFAULT_NAMESPACE_BIT: u64 = 1;

/// The index of `alloc`'s name if the name is exactly what the scheduler
/// names it ([`alloc_name`] of its job, group and that index), so that
/// rebuilding it gives back the same string.
fn name_index(alloc: &Allocation) -> Option<u32> {
    let index = trailing_alloc_index(&alloc.name)?;
    (alloc_name(&alloc.job_id, &alloc.task_group, index) == alloc.name).then_some(index)
}

/// The `packed_names` value of `alloc`; `None` when neither its name nor its
/// namespace packs.
pub(crate) fn packed(alloc: &Allocation) -> Option<u64> {
    let name = name_index(alloc).map_or(0, |i| (u64::from(i) + 1) << 1);
    let namespace = if alloc.namespace == DEFAULT_NAMESPACE {
        DEFAULT_NAMESPACE_BIT
    } else {
        0
    };
    let value = name | namespace;
    (value != 0).then_some(value)
}

/// Whether field `tag` is left out of the stored bytes, `packed` holding
/// it.
pub(crate) fn drops(packed: u64, tag: u32) -> bool {
    (tag == NAME && packed >> 1 != 0) || (tag == NAMESPACE && packed & DEFAULT_NAMESPACE_BIT != 0)
}

/// Puts the name and namespace of a stored `packed_names` value back; the
/// job and group must be in already.
pub(crate) fn unpack(alloc: &mut Allocation, packed: u64) {
    if packed & DEFAULT_NAMESPACE_BIT != 0 {
        alloc.namespace = DEFAULT_NAMESPACE.to_string();
    }
    if let Some(index) = (packed >> 1).checked_sub(1) {
        alloc.name = match u32::try_from(index) {
            Ok(index) => alloc_name(&alloc.job_id, &alloc.task_group, index),
            // Never written (indexes are u32); read back as it says.
            Err(_) => format!("{}.{}[{index}]", alloc.job_id, alloc.task_group),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(name: &str, namespace: &str) -> Allocation {
        Allocation {
            name: name.into(),
            namespace: namespace.into(),
            job_id: "web".into(),
            task_group: "front.end".into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_names_that_read_back_the_same_pack() {
        for (name, packs) in [
            ("web.front.end[0]", true),
            ("web.front.end[4294967295]", true),
            ("web.front.end[4294967296]", false),
            ("web.front.end[01]", false),
            ("web.front.end[+1]", false),
            ("web.front.end[]", false),
            ("web.front.end[1", false),
            ("web.other[1]", false),
            ("webx.front.end[1]", false),
            ("", false),
        ] {
            let a = alloc(name, "prod");
            assert_eq!(packed(&a).is_some(), packs, "{name}");
            if let Some(value) = packed(&a) {
                let mut back = alloc("", "prod");
                unpack(&mut back, value);
                assert_eq!(back.name, name);
                assert!(drops(value, NAME) && !drops(value, NAMESPACE));
            }
        }
    }

    #[test]
    fn the_default_namespace_packs_alone_or_with_the_name() {
        let odd = alloc("by hand", "default");
        let value = packed(&odd).unwrap();
        assert!(drops(value, NAMESPACE) && !drops(value, NAME));
        let mut back = alloc("by hand", "");
        unpack(&mut back, value);
        assert_eq!(back, odd);

        let both = alloc("web.front.end[7]", "default");
        let value = packed(&both).unwrap();
        assert!(drops(value, NAMESPACE) && drops(value, NAME));
        let mut back = alloc("", "");
        unpack(&mut back, value);
        assert_eq!(back, both);

        assert_eq!(packed(&alloc("by hand", "Default")), None);
    }
}
