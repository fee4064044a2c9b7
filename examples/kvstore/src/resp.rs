//! RESP2 on the server's side: requests read from a client's bytes, replies written as bytes.
//!
//! A request is either a multibulk array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what
//! every client library, `redis-cli` and `redis-benchmark` send) or an inline command (`PING\r\n`
//! typed over a raw connection; split on spaces and tabs, without Redis's quoting). Parsing is
//! incremental: [`parse`] answers `Ok(None)` until a whole request is in the buffer, and it reads
//! only headers to decide, so a large bulk is not rescanned as it arrives.
//!
//! Limits (checked on the headers, before the bytes they announce are awaited, so that no memory
//! is kept for a request that will be refused): a bulk string of at most [`MAX_BULK`] bytes, at
//! most [`MAX_ARGS`] arguments, at most [`MAX_REQUEST`] bytes announced for one request, an
//! inline command or header line of at most [`MAX_INLINE`] bytes. Anything else that is not
//! RESP2 is a [`ProtocolError`], whose text is Redis's where Redis has one; the connection
//! answers it and closes.
//!
//! This is a hand-written parser, not a crate's: the well-kept RESP crates (`redis-protocol`,
//! for one) decode *frames* and wait for whatever length a header announces, so the limits above
//! would need a scan of the headers of our own anyway, and they do not read inline commands.
//! Replies are written by the small encoders at the end of this module.

/// The longest bulk string a request may carry (Redis's `proto-max-bulk-len` is 512 MiB; a
/// cache of small values needs far less, and each connection may hold one request this large).
pub const MAX_BULK: usize = 16 << 20;
/// The most arguments one request may have (Redis allows up to 2^31 - 1).
pub const MAX_ARGS: usize = 1 << 20;
/// The most bytes the headers of one request may announce in all (Redis's query buffer limit
/// is 1 GiB).
pub const MAX_REQUEST: usize = 64 << 20;
/// The longest inline command or header line (Redis's `PROTO_INLINE_MAX_SIZE`).
pub const MAX_INLINE: usize = 64 << 10;

/// A request that is not RESP2 or exceeds a limit: the text of the error reply (without the
/// leading `-` and the line end).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn protocol(what: &str) -> ProtocolError {
    ProtocolError(format!("ERR Protocol error: {what}"))
}

/// One parsed request: its arguments (the command name first) and how many bytes it took.
pub type Parsed = (Vec<Vec<u8>>, usize);

/// Reads the first request in `buf`: `Ok(Some((args, consumed)))` when it is whole (`args` may be
/// empty for an empty inline line or `*0`, which clients may send and Redis ignores),
/// `Ok(None)` when more bytes are needed, an error when the bytes can never be a request within
/// the limits.
pub fn parse(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => multibulk(buf),
        Some(_) => inline(buf),
    }
}

/// The line that starts at `from` (without its `\r\n`) and where the next one starts, or `None`
/// while it is incomplete; a line longer than [`MAX_INLINE`] is refused with `too_long`.
fn line<'a>(
    buf: &'a [u8],
    from: usize,
    too_long: &str,
) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
    let window = &buf[from..buf.len().min(from + MAX_INLINE + 2)];
    match window.windows(2).position(|w| w == b"\r\n") {
        Some(end) => Ok(Some((&window[..end], from + end + 2))),
        None if window.len() >= MAX_INLINE + 2 => Err(protocol(too_long)),
        None => Ok(None),
    }
}

/// A decimal number as RESP headers write it (an optional `-`, digits, nothing else).
fn number(text: &[u8]) -> Option<i64> {
    let (neg, digits) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = digits
        .iter()
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    Some(if neg { -v } else { v })
}

fn multibulk(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let Some((head, mut at)) = line(buf, 1, "too big mbulk count string")? else {
        return Ok(None);
    };
    let count = number(head).ok_or_else(|| protocol("invalid multibulk length"))?;
    if count <= 0 {
        return Ok(Some((Vec::new(), at)));
    }
    if count as u64 > MAX_ARGS as u64 {
        return Err(protocol("invalid multibulk length"));
    }
    // First the headers only: refuse what exceeds a limit before waiting for its bytes.
    let mut spans = Vec::with_capacity((count as usize).min(1024));
    let mut announced = 0usize;
    for _ in 0..count {
        match buf.get(at) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&other) => {
                return Err(protocol(&format!(
                    "expected '$', got '{}'",
                    char::from(other).escape_default()
                )));
            }
        }
        let Some((len, data)) = line(buf, at + 1, "too big bulk count string")? else {
            return Ok(None);
        };
        let len = match number(len) {
            Some(n) if (0..=MAX_BULK as i64).contains(&n) => n as usize,
            _ => return Err(protocol("invalid bulk length")),
        };
        announced += len;
        if announced > MAX_REQUEST {
            return Err(protocol("request larger than 64 MiB"));
        }
        if buf.len() < data + len + 2 {
            return Ok(None);
        }
        if &buf[data + len..data + len + 2] != b"\r\n" {
            return Err(protocol("bulk string not followed by CRLF"));
        }
        spans.push((data, len));
        at = data + len + 2;
    }
    let args = spans
        .into_iter()
        .map(|(from, len)| buf[from..from + len].to_vec())
        .collect();
    Ok(Some((args, at)))
}

fn inline(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let window = &buf[..buf.len().min(MAX_INLINE + 1)];
    let Some(end) = window.iter().position(|&b| b == b'\n') else {
        if window.len() > MAX_INLINE {
            return Err(protocol("too big inline request"));
        }
        return Ok(None);
    };
    let text = buf[..end].strip_suffix(b"\r").unwrap_or(&buf[..end]);
    let args = text
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|w| !w.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    Ok(Some((args, end + 1)))
}

/// `+text\r\n`
pub fn simple(out: &mut Vec<u8>, text: &str) {
    out.push(b'+');
    out.extend_from_slice(text.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `-text\r\n`, with line ends in `text` turned into spaces (as Redis does), so that an error
/// never breaks the framing.
pub fn error(out: &mut Vec<u8>, text: &str) {
    out.push(b'-');
    out.extend(
        text.bytes()
            .map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
    );
    out.extend_from_slice(b"\r\n");
}

fn header(out: &mut Vec<u8>, kind: u8, n: i64) {
    out.push(kind);
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut v = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
    out.extend_from_slice(b"\r\n");
}

/// `:n\r\n`
pub fn integer(out: &mut Vec<u8>, n: i64) {
    header(out, b':', n);
}

/// `$len\r\nbytes\r\n`
pub fn bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    header(out, b'$', bytes.len() as i64);
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `$-1\r\n`, the nil bulk string.
pub fn nil(out: &mut Vec<u8>) {
    out.extend_from_slice(b"$-1\r\n");
}

/// `*n\r\n`, the header of an array of `n` replies that follow.
pub fn array(out: &mut Vec<u8>, n: usize) {
    header(out, b'*', n as i64);
}

#[cfg(test)]
mod tests;
