//! Hashes, bcrypt and UUIDs.

use sha2::Digest as _;

use super::{FResult, FuncError, arity, int, string};
use crate::hcl::eval::value::Value;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    let hash = |f: fn(&[u8]) -> String| -> FResult {
        arity(args, 1)?;
        Ok(Value::String(f(string(args, 0)?.as_bytes())))
    };
    Some(match name {
        "md5" => hash(|b| hex(&md5::Md5::digest(b))),
        "sha1" => hash(|b| sha1_smol::Sha1::from(b).digest().to_string()),
        "sha256" => hash(|b| hex(&sha2::Sha256::digest(b))),
        "sha512" => hash(|b| hex(&sha2::Sha512::digest(b))),
        "bcrypt" => (|| {
            if !(1..=2).contains(&args.len()) {
                return Err(FuncError::Arity(format!(
                    "expects 1 or 2 argument(s), got {}",
                    args.len()
                )));
            }
            let cost = if args.len() == 2 { int(args, 1)? } else { 10 };
            // Each step of cost doubles the work: 31, which bcrypt allows, would hold a
            // core for days, and jobs reach the server too. 14 is about a second.
            let cost = u32::try_from(cost)
                .ok()
                .filter(|c| (4..=14).contains(c))
                .ok_or_else(|| FuncError::Arg(1, "cost must be between 4 and 14".into()))?;
            bcrypt::hash(string(args, 0)?, cost)
                .map(|h| Value::String(h.replacen("$2b$", "$2a$", 1)))
                .map_err(|e| FuncError::Failed(format!("error occurred generating password {e}")))
        })(),
        "uuidv4" => (|| {
            arity(args, 0)?;
            Ok(Value::String(uuid::Uuid::new_v4().to_string()))
        })(),
        "uuidv5" => (|| {
            arity(args, 2)?;
            let ns = string(args, 0)?;
            let namespace = match ns.as_str() {
                "dns" => uuid::Uuid::NAMESPACE_DNS,
                "url" => uuid::Uuid::NAMESPACE_URL,
                "oid" => uuid::Uuid::NAMESPACE_OID,
                "x500" => uuid::Uuid::NAMESPACE_X500,
                other => uuid::Uuid::parse_str(other).map_err(|e| {
                    FuncError::Arg(
                        0,
                        format!("uuidv5() doesn't support namespace {other} ({e})"),
                    )
                })?,
            };
            Ok(Value::String(
                uuid::Uuid::new_v5(&namespace, string(args, 1)?.as_bytes()).to_string(),
            ))
        })(),
        _ => return None,
    })
}
