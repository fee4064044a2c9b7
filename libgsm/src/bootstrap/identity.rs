//! Binary identity: what tells two ranks whether they run the same build.
//!
//! The identity is the GNU build-id note (`NT_GNU_BUILD_ID`) of the running executable, read from
//! the ELF program headers of `/proc/self/exe` (the linker computes it from the output's contents,
//! so two different builds differ and copies of one build agree). An executable without that note
//! (or one that is not a little-endian ELF64 file) is identified by a 64-bit FNV-1a hash of all its
//! file bytes instead. This module only reads files; it does not compare ranks (see the parent
//! module) and it says nothing about shared libraries the executable loads.

use std::fmt;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The identity of one build of a program.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryId {
    /// The GNU build-id note's bytes.
    BuildId(Vec<u8>),
    /// FNV-1a (64-bit, standard offset basis and prime) of the executable's file bytes, used when
    /// the executable has no build-id note.
    FileHash(u64),
}

/// Why the identity of an executable could not be found.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the executable {path} to identify this build: {source}")]
pub struct IdentityError {
    /// The file that could not be read.
    pub path: PathBuf,
    /// What went wrong.
    #[source]
    pub source: std::io::Error,
}

impl BinaryId {
    /// The identity of the running program (`/proc/self/exe`).
    ///
    /// # Errors
    /// If the executable cannot be read.
    pub fn current() -> Result<Self, IdentityError> {
        Self::of_path(Path::new("/proc/self/exe"))
    }

    /// The identity of the executable at `path`: its build-id if it has one, else its file hash.
    ///
    /// # Errors
    /// If the file cannot be read.
    pub fn of_path(path: &Path) -> Result<Self, IdentityError> {
        let wrap = |source| IdentityError {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::open(path).map_err(wrap)?;
        if let Some(id) = build_id(&mut file).map_err(wrap)? {
            return Ok(Self::BuildId(id));
        }
        file.seek(SeekFrom::Start(0)).map_err(wrap)?;
        let mut reader = BufReader::with_capacity(1 << 16, file);
        let mut hash = Fnv1a64::new();
        let mut buf = [0u8; 1 << 16];
        loop {
            let n = reader.read(&mut buf).map_err(wrap)?;
            if n == 0 {
                break;
            }
            hash.write(&buf[..n]);
        }
        Ok(Self::FileHash(hash.finish()))
    }

    /// Encodes the identity for the bootstrap all-gather: a kind byte, a length byte, the bytes.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::BuildId(bytes) => {
                // Build-ids are 16 or 20 bytes in practice; a longer note is cut at 255 bytes,
                // which every rank does alike.
                let len = bytes.len().min(255);
                out.push(0);
                out.push(len as u8);
                out.extend_from_slice(&bytes[..len]);
            }
            Self::FileHash(hash) => {
                out.push(1);
                out.push(8);
                out.extend_from_slice(&hash.to_le_bytes());
            }
        }
    }

    /// Decodes what [`encode`](Self::encode) wrote; returns the identity and the bytes used.
    pub(crate) fn decode(bytes: &[u8]) -> Option<(Self, usize)> {
        let (&kind, rest) = bytes.split_first()?;
        let (&len, rest) = rest.split_first()?;
        let body = rest.get(..usize::from(len))?;
        let id = match kind {
            0 => Self::BuildId(body.to_vec()),
            1 => Self::FileHash(u64::from_le_bytes(body.try_into().ok()?)),
            _ => return None,
        };
        Some((id, 2 + usize::from(len)))
    }
}

impl fmt::Display for BinaryId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BuildId(bytes) => {
                f.write_str("build-id ")?;
                for b in bytes {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
            Self::FileHash(hash) => write!(f, "file hash (FNV-1a 64) {hash:016x}"),
        }
    }
}

/// 64-bit FNV-1a, chosen because it is fixed (no per-process keys, unlike std's `RandomState`)
/// and needs no dependency. It identifies builds; it is not a defence against forgery.
struct Fnv1a64(u64);

impl Fnv1a64 {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

const PT_NOTE: u32 = 4;
const NT_GNU_BUILD_ID: u32 = 3;
/// Bounds on what we read, so a corrupt header cannot make us allocate without limit.
const MAX_PHDRS: usize = 4096;
const MAX_NOTE_SEGMENT: u64 = 1 << 20;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The build-id note of a little-endian ELF64 file, `None` if it has none or is another format.
fn build_id(file: &mut File) -> std::io::Result<Option<Vec<u8>>> {
    let mut header = [0u8; 64];
    if read_at(file, 0, &mut header).is_err() {
        return Ok(None); // shorter than an ELF header: not ELF
    }
    // Magic, ELFCLASS64, ELFDATA2LSB.
    if header[..4] != *b"\x7fELF" || header[4] != 2 || header[5] != 1 {
        return Ok(None);
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (
        u64_at(&header, 0x20),
        u16_at(&header, 0x36),
        u16_at(&header, 0x38),
    ) else {
        return Ok(None);
    };
    let (phentsize, phnum) = (usize::from(phentsize), usize::from(phnum));
    if phentsize < 56 || phnum > MAX_PHDRS {
        return Ok(None);
    }
    let mut phdrs = vec![0u8; phentsize * phnum];
    if read_at(file, phoff, &mut phdrs).is_err() {
        return Ok(None);
    }
    for ph in phdrs.chunks_exact(phentsize) {
        let (Some(kind), Some(offset), Some(size), Some(align)) =
            (u32_at(ph, 0), u64_at(ph, 8), u64_at(ph, 32), u64_at(ph, 48))
        else {
            continue;
        };
        if kind != PT_NOTE || size > MAX_NOTE_SEGMENT {
            continue;
        }
        let mut notes = vec![0u8; size as usize];
        if read_at(file, offset, &mut notes).is_err() {
            continue;
        }
        if let Some(id) = find_build_id(&notes, if align == 8 { 8 } else { 4 }) {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Walks the notes of one PT_NOTE segment (each: namesz, descsz, type, name, desc, padded).
fn find_build_id(mut notes: &[u8], align: usize) -> Option<Vec<u8>> {
    let pad = |n: usize| n.checked_add(align - 1).map(|v| v & !(align - 1));
    while notes.len() >= 12 {
        let namesz = u32_at(notes, 0)? as usize;
        let descsz = u32_at(notes, 4)? as usize;
        let kind = u32_at(notes, 8)?;
        let name_end = 12usize.checked_add(pad(namesz)?)?;
        let desc_end = name_end.checked_add(pad(descsz)?)?;
        let name = notes.get(12..12 + namesz)?;
        let desc = notes.get(name_end..name_end.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" && !desc.is_empty() {
            return Some(desc.to_vec());
        }
        notes = notes.get(desc_end.min(notes.len())..)?;
    }
    None
}

fn read_at(file: &mut File, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_the_published_vectors() {
        let of = |s: &[u8]| {
            let mut h = Fnv1a64::new();
            h.write(s);
            h.finish()
        };
        assert_eq!(of(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(of(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(of(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn identities_round_trip_through_their_encoding() {
        for id in [
            BinaryId::BuildId(vec![1, 2, 3, 250]),
            BinaryId::FileHash(42),
        ] {
            let mut bytes = Vec::new();
            id.encode(&mut bytes);
            bytes.push(99);
            let (back, used) = BinaryId::decode(&bytes).expect("decodes");
            assert_eq!(back, id);
            assert_eq!(used, bytes.len() - 1);
        }
        assert!(BinaryId::decode(&[7, 0]).is_none());
        assert!(BinaryId::decode(&[0, 4, 1]).is_none());
    }

    #[test]
    fn notes_are_walked_past_other_notes() {
        let mut seg = Vec::new();
        // An ABI-tag note first (name "GNU", type 1, 16-byte desc), then the build-id.
        for (kind, desc) in [(1u32, vec![0u8; 16]), (3, vec![0xab; 20])] {
            seg.extend_from_slice(&4u32.to_le_bytes());
            seg.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            seg.extend_from_slice(&kind.to_le_bytes());
            seg.extend_from_slice(b"GNU\0");
            seg.extend_from_slice(&desc);
        }
        assert_eq!(find_build_id(&seg, 4), Some(vec![0xab; 20]));
        assert_eq!(find_build_id(&seg[..40], 4), None);
    }
}
