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
/// A closure that captures a `String`, `Vec` or `Box` fails to compile with
/// ``the trait bound `String: Copy` is not satisfied in `{closure@…}` `` and the note
/// ``required for `{closure@…}` to implement `NoRef` ``, and one that borrows a local with
/// ``borrowed value does not live long enough … argument requires that `x` is borrowed for
/// `'static` ``. Both mean: the closure captures something that cannot travel; move owned data
/// in as the argument of `apply_with` instead, and copy what you need out of a borrow first.
/// (The trait's own message, below, is what rustc would print, but rustc 1.95 reports the
/// failing `Copy` or `'static` bound behind the blanket impl instead: rust-lang/rust#119983,
/// #130563. It stays for a compiler that shows it.)
#[diagnostic::on_unimplemented(
    message = "the closure passed to gossamer cannot travel to another worker: it captures data that is not plain (`Copy + Send + 'static`)",
    label = "this closure captures a reference or an owned heap value (String, Vec, Box, ...)",
    note = "captured bytes are copied as they are to the trustee; capture only plain `Copy` data, and pass owned data as the argument of `Trust::apply_with` (or as the result)"
)]
pub trait NoRef: Copy + Send + 'static {}

impl<T: Copy + Send + 'static> NoRef for T {}

/// A value that can be the argument or the result of a delegation.
///
/// Within one process such values are moved by bytes and never serialised; across processes they
/// are serialised with `postcard`.
pub trait Wire: serde::Serialize + serde::de::DeserializeOwned + Send + 'static {}

impl<T: serde::Serialize + serde::de::DeserializeOwned + Send + 'static> Wire for T {}
