//! Identity of a process from `/proc/<pid>/stat`: its state and its start time,
//! which tells a live task from an unrelated process that reused its pid.

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// One-letter state (`R`, `S`, `Z`…).
    pub state: char,
    /// Start time in clock ticks after boot.
    pub start_ticks: u64,
}

impl ProcStat {
    /// Parses the contents of a stat file. The command name may hold spaces and
    /// parentheses, so fields are counted from the last `)`.
    pub fn parse(text: &str) -> Option<ProcStat> {
        let after = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        // Field 3 (state) is the first after the name; field 22 (starttime) the 20th.
        let state = fields.first()?.chars().next()?;
        let start_ticks = fields.get(19)?.parse().ok()?;
        Some(ProcStat { state, start_ticks })
    }

    /// A process that has exited but not been reaped is not alive.
    pub fn alive(&self) -> bool {
        !matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// The stat of `pid`, if the process exists.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    if pid <= 0 {
        return None;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|t| ProcStat::parse(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_with_spaces_and_parens() {
        let text = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(
            ProcStat::parse(text),
            Some(ProcStat {
                state: 'S',
                start_ticks: 987654
            })
        );
        assert!(ProcStat::parse("garbage").is_none());
        let zombie = ProcStat {
            state: 'Z',
            start_ticks: 1,
        };
        assert!(!zombie.alive());
    }

    #[test]
    fn reads_this_process() {
        let pid = std::process::id() as i32;
        let me = proc_stat(pid).unwrap();
        assert!(me.alive());
        assert_eq!(proc_stat(pid).unwrap().start_ticks, me.start_ticks);
        assert!(proc_stat(-1).is_none());
    }
}
