//! The test bed's delay relay, measured from inside a host: a round trip
//! through it takes at least twice its delay (the lower bound holds however
//! slow the machine is). Root only; prints why and passes elsewhere.

use std::process::Stdio;
use std::time::Duration;

use myelin_bench::testbed::TestBed;

/// An echo server on the host's address, and a client that connects
/// through the relay, sends a line, and prints the round trip in ms.
const ECHO: &str = r#"
import socket, sys, threading, time
host, port, relay = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
srv = socket.socket(); srv.bind((host, port)); srv.listen()
def serve():
    c, _ = srv.accept()
    while (d := c.recv(100)):
        c.sendall(d)
threading.Thread(target=serve, daemon=True).start()
cli = socket.create_connection(("127.0.0.1", relay))
t = time.monotonic(); cli.sendall(b"ping\n"); got = cli.recv(100)
print(got.decode().strip(), int((time.monotonic() - t) * 1000))
"#;

#[test]
fn a_round_trip_through_the_delay_relay_takes_twice_its_delay() {
    let bed = match TestBed::new(1) {
        Ok(b) => b,
        Err(e) if myelin_bench::testbed::required() => panic!("{e}"),
        Err(e) => {
            println!("skipped: {e}");
            return;
        }
    };
    let addr = bed.host(0).addr;
    let _relay = bed
        .delay_relay(
            0,
            19000,
            std::net::SocketAddrV4::new(addr, 9000),
            Duration::from_millis(150),
        )
        .unwrap();
    let out = bed
        .command(0, "python3")
        .args(["-c", ECHO, &addr.to_string(), "9000", "19000"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let w: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(w.first(), Some(&"ping"), "{text}");
    let ms: u64 = w[1].parse().unwrap();
    println!("round trip {ms} ms through a 150 ms relay");
    assert!(ms >= 300, "a round trip of {ms} ms through a 150 ms relay");
}
