//! Shell completion: `caravan completions bash|zsh|fish` prints clap's
//! script, and `caravan -autocomplete-install` / `-autocomplete-uninstall`
//! add or remove the line that loads it in `~/.bashrc` and `~/.zshrc`, as
//! Nomad's flags of the same names do.

use std::path::{Path, PathBuf};

use clap::CommandFactory;
use clap_complete::Shell;

use crate::args::Cli;
use crate::error::CliError;
use crate::ui::Ui;

/// The completion script of `shell`.
pub fn script(shell: Shell) -> String {
    crate::args::with_room(|| {
        let mut buf = Vec::new();
        clap_complete::generate(shell, &mut Cli::command(), "caravan", &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// The line an rc file gets: loads the script this binary prints.
fn rc_line(binary: &Path, shell: &str) -> String {
    format!(
        "source <({} completions {shell}) # caravan -autocomplete-install",
        binary.display()
    )
}

/// The rc files of the shells found under `home`, with their shell's name.
fn rc_files(home: &Path) -> Vec<(PathBuf, &'static str)> {
    [(".bashrc", "bash"), (".zshrc", "zsh")]
        .into_iter()
        .map(|(file, shell)| (home.join(file), shell))
        .filter(|(path, _)| path.exists())
        .collect()
}

/// Adds (`install`) or removes the completion line in each rc file under `home`.
fn edit_rc_files(home: &Path, binary: &Path, install: bool) -> Result<Vec<String>, CliError> {
    let files = rc_files(home);
    if files.is_empty() {
        return Err(CliError::Other(format!(
            "No ~/.bashrc or ~/.zshrc in {} to {} completion",
            home.display(),
            if install { "install" } else { "uninstall" }
        )));
    }
    let mut done = Vec::new();
    for (path, shell) in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| CliError::Other(format!("Error reading {}: {e}", path.display())))?;
        let marker = "# caravan -autocomplete-install";
        let present = text.lines().any(|l| l.ends_with(marker));
        let new = if install {
            if present {
                return Err(CliError::Other(format!(
                    "already installed in {}",
                    path.display()
                )));
            }
            let sep = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            format!("{text}{sep}{}\n", rc_line(binary, shell))
        } else {
            if !present {
                return Err(CliError::Other(format!(
                    "not installed in {}",
                    path.display()
                )));
            }
            text.lines()
                .filter(|l| !l.ends_with(marker))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        std::fs::write(&path, new)
            .map_err(|e| CliError::Other(format!("Error writing {}: {e}", path.display())))?;
        done.push(path.display().to_string());
    }
    Ok(done)
}

/// Handles `-autocomplete-install` and `-autocomplete-uninstall` given
/// alone, before the command line is parsed; `None` for any other command line.
pub fn autocomplete(args: &[String], ui: &mut Ui) -> Option<u8> {
    let flag = match args.get(1..) {
        Some([one]) => one.trim_start_matches('-'),
        _ => return None,
    };
    let install = match flag {
        "autocomplete-install" => true,
        "autocomplete-uninstall" => false,
        _ => return None,
    };
    let result = (|| {
        let home = std::env::var_os("HOME")
            .map(PathBuf::from)
            .ok_or_else(|| CliError::Other("HOME is not set".into()))?;
        let binary = std::env::current_exe()
            .map_err(|e| CliError::Other(format!("Error finding this binary: {e}")))?;
        edit_rc_files(&home, &binary, install)
    })();
    Some(match result {
        Ok(files) => {
            for f in files {
                ui.output(format!(
                    "Completion {} in {f}",
                    if install { "installed" } else { "removed" }
                ));
            }
            0
        }
        Err(e) => {
            ui.error(format!("Error executing CLI: {e}"));
            1
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_complete_nomads_verbs() {
        let bash = script(Shell::Bash);
        assert!(bash.contains("caravan"), "{bash}");
        for verb in ["job", "namespace", "operator", "scale", "allocs"] {
            assert!(bash.contains(verb), "{verb} missing");
        }
        assert!(script(Shell::Zsh).starts_with("#compdef caravan"));
    }

    #[test]
    fn install_and_uninstall_edit_the_rc_files() {
        let home = tempfile::tempdir().unwrap();
        let bashrc = home.path().join(".bashrc");
        std::fs::write(&bashrc, "export A=1").unwrap();
        let bin = Path::new("/usr/local/bin/caravan");
        let done = edit_rc_files(home.path(), bin, true).unwrap();
        assert_eq!(done.len(), 1);
        let text = std::fs::read_to_string(&bashrc).unwrap();
        assert_eq!(
            text,
            "export A=1\nsource <(/usr/local/bin/caravan completions bash) # caravan -autocomplete-install\n"
        );
        assert!(edit_rc_files(home.path(), bin, true).is_err());
        edit_rc_files(home.path(), bin, false).unwrap();
        assert_eq!(std::fs::read_to_string(&bashrc).unwrap(), "export A=1\n");
        let empty = tempfile::tempdir().unwrap();
        assert!(edit_rc_files(empty.path(), bin, true).is_err());
    }
}
