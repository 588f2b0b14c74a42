//! CIDR arithmetic: `cidrhost`, `cidrnetmask`, `cidrsubnet`, `cidrsubnets`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{FResult, FuncError, arity, at_least, int, string};
use crate::hcl::eval::value::Value;

/// A network: its masked address as a number, prefix length and address width in bits.
#[derive(Debug, Clone, Copy)]
struct Net {
    addr: u128,
    prefix: u32,
    width: u32,
}

impl Net {
    fn parse(s: &str) -> Result<Net, FuncError> {
        let bad = || {
            FuncError::Arg(
                0,
                format!("invalid CIDR expression: invalid CIDR address: {s}"),
            )
        };
        let (ip, len) = s.split_once('/').ok_or_else(bad)?;
        let prefix: u32 = len.parse().map_err(|_| bad())?;
        let (addr, width) = match ip.parse::<IpAddr>().map_err(|_| bad())? {
            IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
            IpAddr::V6(v6) => (u128::from(v6), 128),
        };
        if prefix > width {
            return Err(bad());
        }
        Ok(Net {
            addr: addr & mask(prefix, width),
            prefix,
            width,
        })
    }

    fn host_bits(&self) -> u32 {
        self.width - self.prefix
    }

    fn ip(&self, addr: u128) -> String {
        if self.width == 32 {
            Ipv4Addr::from(addr as u32).to_string()
        } else {
            Ipv6Addr::from(addr).to_string()
        }
    }

    fn cidr(&self) -> String {
        format!("{}/{}", self.ip(self.addr), self.prefix)
    }

    fn last(&self) -> u128 {
        self.addr | !mask(self.prefix, self.width) & full(self.width)
    }
}

fn full(width: u32) -> u128 {
    if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    }
}

fn mask(prefix: u32, width: u32) -> u128 {
    if prefix == 0 {
        return 0;
    }
    full(width) & !full(width).checked_shr(prefix).unwrap_or(0)
}

pub(super) fn call(name: &str, args: &[Value]) -> Option<FResult> {
    Some(match name {
        "cidrhost" => (|| {
            arity(args, 2)?;
            let net = Net::parse(&string(args, 0)?)?;
            let num = int(args, 1)?;
            let max: i128 = (1i128 << net.host_bits().min(126)) - 1;
            let n = if num < 0 {
                max + i128::from(num) + 1
            } else {
                i128::from(num)
            };
            if n < 0 || n > max {
                return Err(FuncError::Failed(format!(
                    "prefix of {} does not accommodate a host numbered {num}",
                    net.prefix
                )));
            }
            Ok(Value::String(net.ip(net.addr | n as u128)))
        })(),
        "cidrnetmask" => (|| {
            arity(args, 1)?;
            let net = Net::parse(&string(args, 0)?)?;
            if net.width != 32 {
                return Err(FuncError::Failed("only IPv4 networks are supported".into()));
            }
            Ok(Value::String(net.ip(mask(net.prefix, 32))))
        })(),
        "cidrsubnet" => (|| {
            arity(args, 3)?;
            let net = Net::parse(&string(args, 0)?)?;
            let newbits = int(args, 1)?;
            let num = int(args, 2)?;
            if newbits < 0 || num < 0 {
                return Err(FuncError::Failed(
                    "newbits and netnum must not be negative".into(),
                ));
            }
            let new_prefix = net.prefix + newbits as u32;
            if newbits > 32 || new_prefix > net.width {
                return Err(FuncError::Failed(format!(
                    "insufficient address space to extend prefix of {} by {newbits}",
                    net.prefix
                )));
            }
            if (num as u128) > (1u128 << newbits) - 1 {
                return Err(FuncError::Failed(format!(
                    "prefix extension of {newbits} does not accommodate a subnet numbered {num}"
                )));
            }
            let shifted = (num as u128)
                .checked_shl(net.width - new_prefix)
                .unwrap_or(0);
            let sub = Net {
                addr: net.addr | shifted,
                prefix: new_prefix,
                width: net.width,
            };
            Ok(Value::String(sub.cidr()))
        })(),
        "cidrsubnets" => (|| {
            at_least(args, 1)?;
            let net = Net::parse(&string(args, 0)?)?;
            let mut out = Vec::new();
            let mut next_start = net.addr;
            for i in 1..args.len() {
                let bits = int(args, i)?;
                if bits < 1 {
                    return Err(FuncError::Arg(
                        i,
                        "must extend prefix by at least one bit".into(),
                    ));
                }
                if bits > 32 {
                    return Err(FuncError::Arg(
                        i,
                        "may not extend prefix by more than 32 bits".into(),
                    ));
                }
                let len = net.prefix + bits as u32;
                if len > net.width {
                    return Err(FuncError::Arg(
                        i,
                        format!(
                            "would extend prefix to {len} bits, which is too long for an {} address",
                            if net.width == 32 { "IPv4" } else { "IPv6" }
                        ),
                    ));
                }
                // Align the next free address up to a boundary of this subnet's size.
                let size_bits = net.width - len;
                let aligned = if size_bits >= 128 {
                    0
                } else {
                    let size = 1u128 << size_bits;
                    next_start.div_ceil(size).checked_mul(size).ok_or_else(|| {
                        FuncError::Arg(i, "not enough remaining address space".into())
                    })?
                };
                let sub = Net {
                    addr: aligned,
                    prefix: len,
                    width: net.width,
                };
                if aligned < net.addr || sub.last() > net.last() || aligned < next_start {
                    return Err(FuncError::Arg(
                        i,
                        format!(
                            "not enough remaining address space for a subnet with a prefix of {len} bits after {}",
                            out.last()
                                .and_then(|v: &Value| v.to_str())
                                .unwrap_or_else(|| net.cidr())
                        ),
                    ));
                }
                out.push(Value::String(sub.cidr()));
                next_start = sub.last().wrapping_add(1);
            }
            Ok(Value::List(out))
        })(),
        _ => return None,
    })
}
