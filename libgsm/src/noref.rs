//! Marker traits for what may travel in a delegation: [`NoRef`] for closures whose captured bytes
//! are copied as they are, and [`Wire`] for owned values (arguments and results).
//!
//! This module only states the bounds; it does not encode anything. Inside one process a `Wire`
//! value is *moved by bytes* (its bytes are copied into a record and the original is forgotten, so
//! heap data it owns changes hands without a copy); it is serialised with `postcard` only when it
//! crosses a process (to a worker of another rank).

/// A closure (or any value) whose bytes can be copied to another worker and used there.
///
/// On stable Rust "captures only plain data" is approximated by `Copy + Send + 'static`: a closure
/// is `Copy` exactly when all its captures are, which excludes `String`, `Vec`, `Box` and `&mut`,
/// and `'static` excludes borrows of locals.
///
/// The approximation lets through what stable Rust cannot tell apart from plain data: `&'static`
/// references (to a `static`, a literal, or memory leaked with `Box::leak`), raw pointers and
/// function pointers. Within one process they stay valid wherever the closure runs. **To a worker
/// of another rank they are addresses of another process**: a leaked `&'static` never points to
/// the same data there, and a `static`, a literal or a function only lines up while every rank
/// runs the same binary with address-space randomisation off (`gsmrun`'s default, not something
/// the runtime checks per closure). The closure's own code is not affected: it travels as an
/// offset in the binary and is correct either way. Send such data by value instead: as the
/// argument of [`Trust::apply_with`](crate::Trust::apply_with) or
/// [`spawn_on_with`](crate::spawn_on_with), or as a message ([`send`](crate::send)).
///
/// # What the compiler says
///
/// A closure that captures a `String`, `Vec`, `Box` or a [`Trust`](crate::Trust) fails to
/// compile with this trait's own message, "this closure cannot travel to another worker: it
/// captures data that is not plain", and notes that say what to do instead: pass owned data as
/// the argument of `apply_with`, and to delegate onward from the trustee, pass the other
/// `Trust` that way too and call `apply_then` on it there. `#[diagnostic::do_not_recommend]` on
/// the blanket impl below is what makes rustc print this message instead of the failing `Copy`
/// bound behind the impl (``the trait bound `String: Copy` is not satisfied``); the messages are
/// pinned by `libgsm/tests/diagnostics.rs`. A closure that borrows a local fails with
/// ``borrowed value does not live long enough … argument requires that `x` is borrowed for
/// `'static` ``: copy what you need out of the borrow first.
#[diagnostic::on_unimplemented(
    message = "this closure cannot travel to another worker: it captures data that is not plain (`Copy + Send + 'static`)",
    label = "captures a value that is not `Copy` (a String, Vec, Box, Trust, ...) or not `Send`",
    note = "a delegated closure's captures are copied byte for byte to the trustee: capture only plain `Copy` data",
    note = "pass owned data (String, Vec, Box, a struct of them) as the argument of `Trust::apply_with` (or `spawn_on_with`), not as a capture",
    note = "to delegate onward from the trustee, pass the other `Trust` as that argument too (`t.apply_with(other.clone(), |v, other| other.apply_then(..))`): a `Trust` is not `Copy`, it travels as an argument"
)]
pub trait NoRef: Copy + Send + 'static {}

// Without `do_not_recommend` rustc reports the leaf bound that failed behind this impl
// (`String: Copy`) and never the trait's own message (rust-lang/rust#119983).
#[diagnostic::do_not_recommend]
impl<T: Copy + Send + 'static> NoRef for T {}

/// A value that can be the argument or the result of a delegation.
///
/// Within one process such values are moved by bytes and never serialised; across processes they
/// are serialised with `postcard`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be the argument or result of a delegation: it is not `Wire` (serde `Serialize + DeserializeOwned + Send + 'static`)",
    label = "this value travels to or from another worker, possibly of another process",
    note = "derive `serde::Serialize` and `serde::Deserialize` for your own types (with `#[derive(Serialize, Deserialize)]`); borrowed data (`&T`, `&str`) cannot travel: pass an owned `Vec` or `String`",
    note = "a `Trust<T>` is `Wire` already: pass it as the argument of `apply_with` to use it on the trustee"
)]
pub trait Wire: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

// As for `NoRef`: report `Wire` itself, not the serde bound behind it.
#[diagnostic::do_not_recommend]
impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Wire for T {}
