use super::*;
use std::io::Read as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::UnixStream;

fn inode(fd: RawFd) -> u64 {
    std::fs::metadata(format!("/proc/self/fd/{fd}"))
        .expect("fd metadata")
        .ino()
}

#[test]
fn stages_reach_the_socket_named_and_nothing_else() {
    let (ours, theirs) = UnixStream::pair().expect("socketpair");
    let fd = theirs.as_raw_fd();
    let ino = inode(fd);
    crate::sys::proc::clear_fd_flags(fd);
    assert_eq!(checked_channel(&format!("{fd}:{ino}")), Some(fd));
    assert!(
        crate::sys::proc::is_cloexec(fd),
        "the channel is not inherited"
    );
    for stage in [
        Stage::Joining,
        Stage::Run,
        Stage::Leaving,
        Stage::Abandoned,
        Stage::Deadlocked,
        Stage::Follows,
    ] {
        send_stage(fd, stage);
    }
    ours.set_nonblocking(true).expect("nonblocking");
    let mut got = [0u8; 8];
    let n = (&ours).read(&mut got).expect("the stages arrived");
    assert_eq!(&got[..n], b"JRLADF");

    // Another inode, a descriptor that is not a socket, stdin/out/err, a closed one, and
    // text that is not `FD:INODE` are all refused.
    assert_eq!(checked_channel(&format!("{fd}:{}", ino + 1)), None);
    let file = std::fs::File::open("/proc/self/stat").expect("a file");
    let file_fd = file.as_raw_fd();
    assert_eq!(
        checked_channel(&format!("{file_fd}:{}", inode(file_fd))),
        None
    );
    assert_eq!(checked_channel(&format!("2:{}", inode(2))), None);
    drop(file);
    assert_eq!(checked_channel(&format!("{file_fd}:1")), None);
    for text in ["", "7", "x:1", "7:x", "-1:5"] {
        assert_eq!(checked_channel(text), None, "{text:?}");
    }
}
