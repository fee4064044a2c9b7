//! Code identities that can travel: a function is named by its address minus the address of a
//! base function of this binary ([`offset_of`]), the same number in every process that runs the
//! same build (the bootstrap's build-id check makes sure of that).
//!
//! Turning an offset back into code is checked two ways. [`address_of`], for offsets this process
//! encoded itself, only checks that the offset lands in the executable segment that holds the
//! base function. [`entry_in`], for offsets from another process, accepts only the exact entries
//! of a table read once from the binary's own symbol table ([`entries`]): the instances of the
//! one generic function through which a trustee runs delegated code. See
//! `libgsm/TRUST_BOUNDARY.md`.

use std::sync::OnceLock;

use crate::sys::image;

/// The anchor all offsets are relative to.
#[inline(never)]
pub(crate) extern "C" fn base_anchor() -> usize {
    0x6773_6d00
}

/// The path of [`base_anchor`] in the symbol table (demangled, without hash).
const ANCHOR_PATH: &str = "gossamer::wire::codeptr::base_anchor";

#[derive(Debug, Clone, Copy)]
struct Text {
    base: usize,
    lo: usize,
    hi: usize,
}

static TEXT: OnceLock<Text> = OnceLock::new();

fn text() -> Text {
    *TEXT.get_or_init(|| {
        let base = base_anchor as *const () as usize;
        let (lo, hi) = image::text_segment_of(base).unwrap_or((base, base));
        Text { base, lo, hi }
    })
}

/// The offset that names function address `addr`.
#[inline]
pub(crate) fn offset_of(addr: usize) -> u64 {
    addr.wrapping_sub(base_anchor as *const () as usize) as u64
}

/// The address an offset names, if it lies in the binary's text (for offsets this process
/// encoded).
#[inline]
pub(crate) fn address_of(offset: u64) -> Option<usize> {
    let t = text();
    let a = t.base.wrapping_add(offset as usize);
    (a >= t.lo && a < t.hi).then_some(a)
}

static ENTRIES: OnceLock<Result<Box<[u64]>, String>> = OnceLock::new();

/// The sorted offsets of every instance of the generic function at `path` (e.g.
/// `gossamer::worker::entry::entry`) in this binary, read once from its symbol table; an error
/// says why there is no table (a stripped binary, say). The first call's `path` is the one read.
pub(crate) fn entries(path: &str) -> Result<&'static [u64], &'static str> {
    ENTRIES
        .get_or_init(|| read_entries(path))
        .as_deref()
        .map_err(String::as_str)
}

/// The address of the entry at `offset`, if it is exactly one of `table`'s.
#[inline]
pub(crate) fn entry_in(table: &[u64], offset: u64) -> Option<usize> {
    table
        .binary_search(&offset)
        .ok()
        .map(|_| text().base.wrapping_add(offset as usize))
}

fn read_entries(path: &str) -> Result<Box<[u64]>, String> {
    let image = image::OwnImage::map()
        .map_err(|e| format!("cannot read this program's own file (/proc/self/exe): {e}"))?;
    let (anchor, mut found) = entries_in_image(image.bytes(), path)?;
    for f in &mut found {
        *f = f.wrapping_sub(anchor);
    }
    found.sort_unstable();
    found.dedup();
    Ok(found.into_boxed_slice())
}

/// The symbol value of [`base_anchor`] and of every instance of `path` in the ELF image
/// `bytes`. Offsets between two symbols of one image are offsets between their addresses in
/// memory, whatever the load address.
fn entries_in_image(bytes: &[u8], path: &str) -> Result<(u64, Vec<u64>), String> {
    use object::{Object, ObjectSymbol};
    let file = object::File::parse(bytes)
        .map_err(|e| format!("cannot parse this program's own file: {e}"))?;
    let mut anchor = None;
    let mut found = Vec::new();
    let leaf = path.rsplit("::").next().unwrap_or(path);
    for sym in file.symbols() {
        let Ok(name) = sym.name() else { continue };
        // Cheap filter first: both manglings spell the last path segment literally.
        if !(name.contains(leaf) || name.contains("base_anchor")) {
            continue;
        }
        let demangled = format!("{:#}", rustc_demangle::demangle(name));
        if names(&demangled, path) {
            found.push(sym.address());
        } else if names(&demangled, ANCHOR_PATH) {
            anchor = Some(sym.address());
        }
    }
    match anchor {
        Some(a) if !found.is_empty() => Ok((a, found)),
        _ => Err(
            "this program has no symbol table (was it stripped?): gossamer reads it to \
                  check that every delegated request from another process names one of this \
                  program's delegation entries; build it without stripping symbols (Cargo: \
                  `strip = false` or `strip = \"debuginfo\"`)"
                .into(),
        ),
    }
}

/// Whether a demangled symbol names function `path` or one of its generic instances.
fn names(demangled: &str, path: &str) -> bool {
    demangled
        .strip_prefix(path)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with("::<"))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn own_functions_round_trip_and_garbage_is_refused() {
        let f = offset_of as fn(usize) -> u64 as *const () as usize;
        assert_eq!(address_of(offset_of(f)), Some(f));
        let t = text();
        assert!(t.lo < t.hi, "text range not found");
        assert_eq!(address_of(1 << 60), None);
        assert_eq!(address_of(offset_of(t.hi)), None);
        assert_eq!(address_of(offset_of(t.lo - 1)), None);
        assert_eq!(address_of(offset_of(t.lo)), Some(t.lo));
    }

    #[test]
    fn a_symbol_names_a_function_or_its_instances_only() {
        let p = "gossamer::worker::entry::entry";
        assert!(names(p, p));
        assert!(names(
            "gossamer::worker::entry::entry::<gossamer::X<u8>>",
            p
        ));
        assert!(!names("gossamer::worker::entry::entry_of", p));
        assert!(!names("gossamer::worker::entry::entry::{{closure}}", p));
        assert!(!names("x::gossamer::worker::entry::entry", p));
    }

    #[test]
    fn an_image_without_symbols_is_refused_with_the_reason() {
        let e = entries_in_image(b"\x7fELF not really", "a::b").unwrap_err();
        assert!(e.contains("cannot parse"), "{e}");
    }
}
