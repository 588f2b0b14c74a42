//! A group network's `DNS` object, both ways: the servers, search domains
//! and resolver options written into the `/etc/resolv.conf` of the group's
//! tasks that have a file system of their own.

use super::fields::take_str_list;
use super::to_proto::Conversion;
use crate::error::join_path as join;
use caravan_proto::DnsConfig;
use serde_json::{Value, json};

/// The network's `DNS` object as Caravan's config; `None` when absent or
/// empty (the node's own resolv.conf).
pub(super) fn dns_to_proto(
    value: Option<Value>,
    base: &str,
    conv: &mut Conversion,
) -> Option<DnsConfig> {
    let path = join(base, "dns");
    let mut fields = match value? {
        Value::Null => return None,
        Value::Object(map) => map,
        other => {
            conv.err(path, format!("must be an object (got {other})"));
            return None;
        }
    };
    let dns = DnsConfig {
        servers: take_str_list(&mut fields, "Servers", &path, conv),
        searches: take_str_list(&mut fields, "Searches", &path, conv),
        options: take_str_list(&mut fields, "Options", &path, conv),
    };
    for key in fields.keys() {
        conv.err(join(&path, key), "unknown field of a dns block");
    }
    (dns != DnsConfig::default()).then_some(dns)
}

/// Caravan's config as Nomad's `DNS` object.
pub(super) fn dns_from_proto(dns: &DnsConfig) -> Value {
    json!({
        "Servers": dns.servers,
        "Searches": dns.searches,
        "Options": dns.options,
    })
}
