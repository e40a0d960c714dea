//! Reading the zip archives Ray's clients upload as packages (`--working-dir`, `py_modules`):
//! the central directory checked at upload, and the files unpacked into a run's directory.
//!
//! Only what those archives use: stored and deflated entries, no encryption, no zip64 (the
//! upload limit keeps archives far below 4 GiB). Every entry name is checked before anything
//! is written, so no entry can land outside the target directory, and the declared sizes are
//! bounded and then verified while inflating (with the CRC), so an archive cannot unpack
//! into more than it says.

use std::io::Write;
use std::path::{Component, Path};

/// Most entries in one archive.
pub const MAX_ENTRIES: usize = 100_000;

/// Most bytes one archive may unpack to (the sum of its entries' sizes).
pub const MAX_UNPACKED: u64 = 4 * 1024 * 1024 * 1024;

/// One entry of the central directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path inside the archive, `/`-separated; a directory's ends in `/`.
    pub name: String,
    method: u16,
    crc32: u32,
    compressed: u64,
    pub size: u64,
    local_offset: u64,
    /// Unix permission bits, when the archive was made on Unix.
    mode: Option<u32>,
}

impl Entry {
    pub fn is_dir(&self) -> bool {
        self.name.ends_with('/')
    }
}

/// What is wrong with an archive, said so a person can act on it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ZipError(pub String);

fn bad(message: impl Into<String>) -> ZipError {
    ZipError(message.into())
}

fn u16_at(b: &[u8], at: usize) -> Result<u16, ZipError> {
    b.get(at..at + 2).map(|s| u16::from_le_bytes([s[0], s[1]])).ok_or_else(|| bad("truncated archive"))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32, ZipError> {
    b.get(at..at + 4).map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]])).ok_or_else(|| bad("truncated archive"))
}

const EOCD: u32 = 0x0605_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const LOCAL: u32 = 0x0403_4b50;

/// The entries of `archive`, each name checked (relative, no `..`, no backslash or NUL) and
/// the sizes bounded; an error names the first problem.
pub fn entries(archive: &[u8]) -> Result<Vec<Entry>, ZipError> {
    // The end record is in the last 22 bytes plus at most a 64 KiB comment.
    let from = archive.len().saturating_sub(22 + 0xFFFF);
    let eocd = (from..archive.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(archive, i) == Ok(EOCD))
        .ok_or_else(|| bad("not a zip archive (no end of central directory record)"))?;
    let count = u16_at(archive, eocd + 10)? as usize;
    let cd_size = u32_at(archive, eocd + 12)? as usize;
    let cd_offset = u32_at(archive, eocd + 16)? as usize;
    if count == 0xFFFF || cd_offset == 0xFFFF_FFFF || cd_size == 0xFFFF_FFFF {
        return Err(bad("zip64 archives are not supported"));
    }
    if count > MAX_ENTRIES {
        return Err(bad(format!("{count} entries, more than the limit of {MAX_ENTRIES}")));
    }
    let mut out = Vec::with_capacity(count);
    let mut at = cd_offset;
    let mut total: u64 = 0;
    for _ in 0..count {
        if u32_at(archive, at)? != CENTRAL {
            return Err(bad("corrupt central directory"));
        }
        let made_by = u16_at(archive, at + 4)?;
        let flags = u16_at(archive, at + 8)?;
        let method = u16_at(archive, at + 10)?;
        let crc32 = u32_at(archive, at + 16)?;
        let compressed = u32_at(archive, at + 20)? as u64;
        let size = u32_at(archive, at + 24)? as u64;
        let (name_len, extra_len, comment_len) = (u16_at(archive, at + 28)? as usize, u16_at(archive, at + 30)? as usize, u16_at(archive, at + 32)? as usize);
        let external = u32_at(archive, at + 38)?;
        let local_offset = u32_at(archive, at + 42)? as u64;
        let raw = archive.get(at + 46..at + 46 + name_len).ok_or_else(|| bad("truncated archive"))?;
        let name = std::str::from_utf8(raw).map_err(|_| bad("an entry name is not UTF-8"))?.to_string();
        check_name(&name)?;
        if flags & 1 != 0 {
            return Err(bad(format!("`{name}` is encrypted")));
        }
        if method != 0 && method != 8 {
            return Err(bad(format!("`{name}` uses compression method {method}; only stored and deflated entries are supported")));
        }
        total = total.saturating_add(size);
        if total > MAX_UNPACKED {
            return Err(bad(format!("unpacks to more than {} GiB", MAX_UNPACKED >> 30)));
        }
        // Unix permission bits live in the high half of the external attributes.
        let mode = (made_by >> 8 == 3 && external >> 16 != 0).then_some((external >> 16) & 0o7777);
        out.push(Entry { name, method, crc32, compressed, size, local_offset, mode });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

/// Refuses a name that could lead outside the target directory.
fn check_name(name: &str) -> Result<(), ZipError> {
    let unsafe_name = name.is_empty()
        || name.contains('\\')
        || name.contains('\0')
        || Path::new(name).components().any(|c| !matches!(c, Component::Normal(_)));
    if unsafe_name {
        return Err(bad(format!("unsafe entry name `{}` (absolute, `..`, backslash or empty)", name.escape_debug())));
    }
    Ok(())
}

/// The bytes of `entry`, inflated and checked against its size and CRC.
pub fn read(archive: &[u8], entry: &Entry) -> Result<Vec<u8>, ZipError> {
    let at = entry.local_offset as usize;
    if u32_at(archive, at)? != LOCAL {
        return Err(bad(format!("`{}`: corrupt local header", entry.name)));
    }
    let start = at + 30 + u16_at(archive, at + 26)? as usize + u16_at(archive, at + 28)? as usize;
    let data = archive.get(start..start + entry.compressed as usize).ok_or_else(|| bad(format!("`{}`: truncated data", entry.name)))?;
    let bytes = match entry.method {
        0 => data.to_vec(),
        _ => miniz_oxide::inflate::decompress_to_vec_with_limit(data, entry.size as usize)
            .map_err(|e| bad(format!("`{}`: cannot inflate: {e:?}", entry.name)))?,
    };
    if bytes.len() as u64 != entry.size {
        return Err(bad(format!("`{}`: {} bytes, the archive says {}", entry.name, bytes.len(), entry.size)));
    }
    if crc32fast::hash(&bytes) != entry.crc32 {
        return Err(bad(format!("`{}`: CRC mismatch", entry.name)));
    }
    Ok(bytes)
}

/// Every entry checked and inflated once, without writing anything: what an upload passes.
pub fn verify(archive: &[u8]) -> Result<usize, ZipError> {
    let list = entries(archive)?;
    for e in list.iter().filter(|e| !e.is_dir()) {
        read(archive, e)?;
    }
    Ok(list.len())
}

/// Unpacks `archive` into `dir` (created if missing), keeping the executable bits, as Ray
/// unpacks a package into its working directory.
pub fn unpack(archive: &[u8], dir: &Path) -> Result<(), ZipError> {
    let io = |what: &str, path: &Path, e: std::io::Error| bad(format!("{what} {}: {e}", path.display()));
    std::fs::create_dir_all(dir).map_err(|e| io("creating", dir, e))?;
    for entry in entries(archive)? {
        let path = dir.join(entry.name.trim_end_matches('/'));
        if entry.is_dir() {
            std::fs::create_dir_all(&path).map_err(|e| io("creating", &path, e))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io("creating", parent, e))?;
        }
        let bytes = read(archive, &entry)?;
        let mut file = std::fs::File::create(&path).map_err(|e| io("creating", &path, e))?;
        file.write_all(&bytes).map_err(|e| io("writing", &path, e))?;
        if let Some(mode) = entry.mode.filter(|m| m & 0o111 != 0) {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o777));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A zip of `files` (name, bytes, deflate?) as Python's `zipfile` writes one, made on Unix
    /// with mode 0o644 (0o755 for names ending in `.sh`).
    pub(crate) fn archive(files: &[(&str, &[u8], bool)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut central = Vec::new();
        for (name, bytes, deflate) in files {
            let data = if *deflate { miniz_oxide::deflate::compress_to_vec(bytes, 6) } else { bytes.to_vec() };
            let method: u16 = if *deflate { 8 } else { 0 };
            let crc = crc32fast::hash(bytes);
            let offset = out.len() as u32;
            let mode: u32 = if name.ends_with('/') { 0o40755 } else if name.ends_with(".sh") { 0o100755 } else { 0o100644 };
            out.extend_from_slice(&LOCAL.to_le_bytes());
            for v in [20u16, 0, method, 0, 0] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            for v in [crc, data.len() as u32, bytes.len() as u32] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            out.extend_from_slice(&(name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes());
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(&data);
            central.extend_from_slice(&CENTRAL.to_le_bytes());
            for v in [(3u16 << 8) | 20, 20, 0, method, 0, 0] {
                central.extend_from_slice(&v.to_le_bytes());
            }
            for v in [crc, data.len() as u32, bytes.len() as u32] {
                central.extend_from_slice(&v.to_le_bytes());
            }
            for v in [name.len() as u16, 0, 0, 0, 0] {
                central.extend_from_slice(&v.to_le_bytes());
            }
            central.extend_from_slice(&(mode << 16).to_le_bytes());
            central.extend_from_slice(&offset.to_le_bytes());
            central.extend_from_slice(name.as_bytes());
        }
        let cd_offset = out.len() as u32;
        out.extend_from_slice(&central);
        out.extend_from_slice(&EOCD.to_le_bytes());
        for v in [0u16, 0, files.len() as u16, files.len() as u16] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(central.len() as u32).to_le_bytes());
        out.extend_from_slice(&cd_offset.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out
    }

    #[test]
    fn stored_and_deflated_entries_unpack_with_their_modes() {
        let text = b"hello from the package\n".repeat(50);
        let zip = archive(&[("data.txt", &text, true), ("sub/", b"", false), ("sub/run.sh", b"echo ok\n", false)]);
        assert_eq!(verify(&zip), Ok(3));
        let dir = std::env::temp_dir().join(format!("berth-zip-{}", crate::clock::new_id("t")));
        unpack(&zip, &dir).unwrap();
        assert_eq!(std::fs::read(dir.join("data.txt")).unwrap(), text);
        assert_eq!(std::fs::read(dir.join("sub/run.sh")).unwrap(), b"echo ok\n");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(dir.join("sub/run.sh")).unwrap().permissions().mode() & 0o777, 0o755);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn unsafe_or_damaged_archives_are_refused_with_the_reason() {
        for name in ["../escape.txt", "/etc/passwd", "a/../../b", "a\\b"] {
            let err = entries(&archive(&[(name, b"x", false)])).unwrap_err();
            assert!(err.0.contains("unsafe entry name"), "{name}: {err}");
        }
        assert!(entries(b"PK not really").unwrap_err().0.contains("not a zip archive"));
        let mut zip = archive(&[("a.txt", b"abc", false)]);
        zip[30 + 5] = b'X'; // the data of a.txt: "abc" -> "abX"
        assert!(verify(&zip).unwrap_err().0.contains("CRC mismatch"));
        // An entry that says it is smaller than what it inflates to.
        let mut zip = archive(&[("big.txt", &[b'a'; 4096], true)]);
        let cd = zip.len() - 22 - (46 + 7);
        zip[cd + 24..cd + 28].copy_from_slice(&10u32.to_le_bytes());
        assert!(verify(&zip).is_err());
    }
}
