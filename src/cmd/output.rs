//! The output convention every command follows (docs/cli.md, "Everywhere"): a
//! format's flag names the format (`--json`, `--markdown`, `--csv`, `--html`)
//! and takes the FILE to write, `-` for stdout. `--out` meant JSON in `bench`,
//! `merge` and `kernels` and HTML in `report`; it keeps working for one
//! release, with a note on stderr naming its new spelling.

use std::path::PathBuf;

/// The value of a renamed flag: the new one's, or the old one's with a note
/// (clap refuses both at once: `conflicts_with`).
pub fn renamed(
    new: Option<PathBuf>,
    old: Option<PathBuf>,
    old_flag: &str,
    new_flag: &str,
) -> Option<PathBuf> {
    if old.is_some() {
        eprintln!(
            "note: {old_flag} is now {new_flag} (the same file); {old_flag} keeps working until the next release"
        );
    }
    new.or(old)
}

/// Where a switch-or-file flag (`plan --json`, `collect --summary --json`)
/// writes: `None` (not given), or the file; alone, or as `-`, stdout.
pub fn file_or_stdout(value: Option<PathBuf>) -> Option<Option<PathBuf>> {
    value.map(|p| (p.as_os_str() != "-").then_some(p))
}

/// Write `text` where a format's flag says: the file, or stdout for `-`. An
/// error names the flag and the file. Says nothing (`bench` names its files
/// at the end; see [`write`]).
pub fn write_file(flag: &str, path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if path.as_os_str() == "-" {
        print!("{text}");
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("{flag} {}: cannot write", path.display()))
}

/// [`write_file`], then `wrote FILE` on stderr for a file.
pub fn write(flag: &str, path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    write_file(flag, path, text)?;
    if path.as_os_str() != "-" {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}
