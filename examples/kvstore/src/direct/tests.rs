use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use super::*;

/// A connected pair: (the server's end, non-blocking, the client's end).
fn pair() -> (Arc<TcpStream>, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (server, _) = l.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (Arc::new(server), client)
}

#[test]
fn an_owner_writes_to_a_published_socket_of_its_rank() {
    let (server, mut client) = pair();
    let p = Published::new(server, 3);
    let before = owner_writes();
    assert!(write(p.conn(), 3, b"+OK\r\n").is_empty());
    assert!(owner_writes() > before);
    let mut got = [0u8; 5];
    client.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"+OK\r\n");
}

#[test]
fn another_rank_or_a_withdrawn_socket_hands_every_byte_back() {
    let (server, _client) = pair();
    let p = Published::new(server, 0);
    let conn = p.conn();
    assert_eq!(write(conn, 1, b"$1\r\nx\r\n"), b"$1\r\nx\r\n");
    drop(p);
    assert_eq!(write(conn, 0, b"+OK\r\n"), b"+OK\r\n");
}

#[test]
fn a_full_socket_hands_the_rest_back_and_loses_nothing() {
    let (server, mut client) = pair();
    let p = Published::new(server, 0);
    let bytes: Vec<u8> = (0..64 << 20).map(|i: u32| (i % 251) as u8).collect();
    let rest = write(p.conn(), 0, &bytes);
    assert!(
        !rest.is_empty() && rest.len() < bytes.len(),
        "{}",
        rest.len()
    );
    let sent = bytes.len() - rest.len();
    assert_eq!(rest, bytes[sent..]);
    let mut got = vec![0u8; sent];
    client.read_exact(&mut got).unwrap();
    assert_eq!(got, bytes[..sent]);
}
