//! RESP2 on the server's side: requests read from a client's bytes, replies written as bytes.
//!
//! A request is either a multibulk array of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`, what
//! every client library, `redis-cli` and `redis-benchmark` send) or an inline command (`PING\r\n`
//! typed over a raw connection; split on spaces and tabs, without Redis's quoting). Parsing is
//! incremental: a connection's [`Parser`] keeps the arguments of a request in progress across
//! reads and takes the bytes it has read, so a request costs its length once however many reads
//! bring it, and a large bulk is awaited by its length alone.
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

/// Reads the first request in `buf` with a fresh [`Parser`]: `Ok(Some((args, consumed)))` when
/// it is whole (`args` may be empty for an empty inline line or `*0`, which clients may send and
/// Redis ignores), `Ok(None)` when more bytes are needed, an error when the bytes can never be a
/// request within the limits.
pub fn parse(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let mut parser = Parser::default();
    match parser.feed(buf)? {
        (Some(args), used) => Ok(Some((args, used))),
        (None, _) => Ok(None),
    }
}

/// What [`Parser::feed`] took: a whole request's arguments (or `None` while it is partial) and
/// the bytes it used.
pub type Fed = (Option<Vec<Vec<u8>>>, usize);

/// A request read across reads: what it has taken so far is kept, so each byte a client sends
/// is looked at once however many reads a large request takes (the connection drops the bytes
/// [`feed`](Self::feed) took, whole or not).
#[derive(Debug, Default)]
pub struct Parser {
    /// The arguments read so far of the request in progress.
    args: Vec<Vec<u8>>,
    /// Arguments of the multibulk in progress not read yet (0: between requests).
    left: usize,
    /// The length of the bulk whose header was read and whose bytes are awaited.
    bulk: Option<usize>,
    /// Bytes announced by the bulk headers of this request so far.
    announced: usize,
}

impl Parser {
    /// Takes from the front of `buf` what it can: `(Some(args), used)` when a request is whole,
    /// `(None, used)` when it took `used` bytes (headers and whole arguments) and needs more.
    /// After an error the connection closes, so the parser's state no longer matters.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Fed, ProtocolError> {
        if self.left == 0 {
            match buf.first() {
                None => return Ok((None, 0)),
                Some(b'*') => {}
                Some(_) => {
                    return Ok(match inline(buf)? {
                        Some((args, used)) => (Some(args), used),
                        None => (None, 0),
                    });
                }
            }
            let Some((head, at)) = line(buf, 1, "too big mbulk count string")? else {
                return Ok((None, 0));
            };
            let count = number(head).ok_or_else(|| protocol("invalid multibulk length"))?;
            if count <= 0 {
                return Ok((Some(Vec::new()), at));
            }
            if count as u64 > MAX_ARGS as u64 {
                return Err(protocol("invalid multibulk length"));
            }
            self.left = count as usize;
            self.announced = 0;
            self.args = Vec::with_capacity(self.left.min(1024));
            let (done, used) = self.bulks(&buf[at..])?;
            return Ok((done, at + used));
        }
        self.bulks(buf)
    }

    /// Whether a multibulk request has been read in part.
    pub fn in_progress(&self) -> bool {
        self.left > 0
    }

    /// The bytes the request in progress still needs at least (a bulk's whole length once its
    /// header is read), so that the reader can make room for them at once.
    pub fn wanted(&self) -> usize {
        self.bulk.map_or(0, |len| len + 2)
    }

    /// The bulk strings of the multibulk in progress, as far as `buf` holds them.
    fn bulks(&mut self, buf: &[u8]) -> Result<Fed, ProtocolError> {
        let mut at = 0;
        while self.left > 0 {
            let len = match self.bulk {
                Some(len) => len,
                None => {
                    match buf.get(at) {
                        None => return Ok((None, at)),
                        Some(b'$') => {}
                        Some(&other) => {
                            return Err(protocol(&format!(
                                "expected '$', got '{}'",
                                char::from(other).escape_default()
                            )));
                        }
                    }
                    let Some((len, data)) = line(buf, at + 1, "too big bulk count string")? else {
                        return Ok((None, at));
                    };
                    let len = match number(len) {
                        Some(n) if (0..=MAX_BULK as i64).contains(&n) => n as usize,
                        _ => return Err(protocol("invalid bulk length")),
                    };
                    self.announced += len;
                    if self.announced > MAX_REQUEST {
                        return Err(protocol("request larger than 64 MiB"));
                    }
                    at = data;
                    self.bulk = Some(len);
                    len
                }
            };
            if buf.len() < at + len + 2 {
                return Ok((None, at));
            }
            if &buf[at + len..at + len + 2] != b"\r\n" {
                return Err(protocol("bulk string not followed by CRLF"));
            }
            self.args.push(buf[at..at + len].to_vec());
            self.bulk = None;
            self.left -= 1;
            at += len + 2;
        }
        Ok((Some(std::mem::take(&mut self.args)), at))
    }
}

/// The line that starts at `from` (without its `\r\n`) and where the next one starts, or `None`
/// while it is incomplete; a line longer than [`MAX_INLINE`] is refused with `too_long`.
fn line<'a>(
    buf: &'a [u8],
    from: usize,
    too_long: &str,
) -> Result<Option<(&'a [u8], usize)>, ProtocolError> {
    let window = &buf[from.min(buf.len())..buf.len().min(from + MAX_INLINE + 2)];
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

fn inline(buf: &[u8]) -> Result<Option<Parsed>, ProtocolError> {
    let window = &buf[..buf.len().min(MAX_INLINE + 1)];
    let Some(end) = window.iter().position(|&b| b == b'\n') else {
        if window.len() > MAX_INLINE {
            return Err(protocol("too big inline request"));
        }
        return Ok(None);
    };
    let text = buf[..end].strip_suffix(b"\r").unwrap_or(&buf[..end]);
    let args = split_args(text).ok_or_else(|| protocol("unbalanced quotes in request"))?;
    Ok(Some((args, end + 1)))
}

/// C's `isspace`.
fn blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// An inline line's arguments as Redis's `sdssplitargs` reads them: words between blanks, in
/// double quotes (with `\n`, `\r`, `\t`, `\b`, `\a`, `\xHH` and `\` escapes) or single quotes
/// (with `\'`); a closing quote must end the word. `None` for unbalanced quotes. A NUL byte
/// ends the line, as it ends Redis's C string.
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let line = &line[..line.iter().position(|&b| b == 0).unwrap_or(line.len())];
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let hex = |b: u8| (b as char).to_digit(16);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && blank(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(args);
        }
        let (mut dq, mut sq) = (false, false);
        let mut word = Vec::new();
        loop {
            let c = at(p);
            if dq {
                match (c, at(p + 1)) {
                    (b'\\', b'x') if hex(at(p + 2)).is_some() && hex(at(p + 3)).is_some() => {
                        let v = hex(at(p + 2)).unwrap_or(0) * 16 + hex(at(p + 3)).unwrap_or(0);
                        word.push(v as u8);
                        p += 3;
                    }
                    (b'\\', e) if e != 0 => {
                        word.push(match e {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            e => e,
                        });
                        p += 1;
                    }
                    (b'"', next) if next != 0 && !blank(next) => return None,
                    (b'"', _) => {
                        p += 1;
                        break;
                    }
                    (0, _) => return None,
                    (c, _) => word.push(c),
                }
            } else if sq {
                match (c, at(p + 1)) {
                    (b'\\', b'\'') => {
                        word.push(b'\'');
                        p += 1;
                    }
                    (b'\'', next) if next != 0 && !blank(next) => return None,
                    (b'\'', _) => {
                        p += 1;
                        break;
                    }
                    (0, _) => return None,
                    (c, _) => word.push(c),
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => dq = true,
                    b'\'' => sq = true,
                    c => word.push(c),
                }
            }
            p += 1;
        }
        args.push(word);
    }
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
