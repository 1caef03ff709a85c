//! Services: answered calls, no server, a server that dies mid-call.

use std::sync::Arc;
use std::time::Duration;

use myelin::CallError;

use crate::harness::{LONG, Side, Spinning, Test, hold};

/// The peer's `/double` server (doubles an i64), spun until told to exit.
pub mod doubler {
    use super::*;

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let _srv = node
            .create_service::<i64, i64>("/double", |x| 2 * x)
            .unwrap();
        let _spin = Spinning::new(&node);
        s.say("ready");
        s.until_told_to_exit();
    }
}

/// A call to the peer's server is answered.
pub mod answered {
    pub use super::doubler::peer;
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let client = node.create_client::<i64, i64>("/double").unwrap();
        let mut peer = t.peer("server");
        peer.expect("ready");
        assert!(client.wait_for_service(LONG), "the server was not found");
        for x in [21, -4, 1 << 40] {
            assert_eq!(client.call(x, LONG).unwrap(), 2 * x);
        }
        peer.finish();
    }
}

/// With the peer serving another service, a call to one nobody serves
/// fails with `CallError::NoServer` naming it.
pub mod no_server {
    pub use super::doubler::peer;
    use super::*;

    /// How long the call waits for a server: the error, not the time, is
    /// what is checked.
    const WAIT: Duration = Duration::from_millis(200);

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let served = node.create_client::<i64, i64>("/double").unwrap();
        let nobody = node.create_client::<i64, i64>("/nobody").unwrap();
        let mut peer = t.peer("server");
        peer.expect("ready");
        assert!(served.wait_for_service(LONG), "the served one is found");
        assert_eq!(served.call(1, LONG).unwrap(), 2);
        assert!(!nobody.service_is_ready());
        match nobody.call(1, WAIT) {
            Err(CallError::NoServer { service, .. }) => assert_eq!(service, "/nobody"),
            other => panic!("expected NoServer, got {other:?}"),
        }
        peer.finish();
    }
}

/// The server dies while it handles a call (`kill -9`; in one process:
/// the service is dropped while its callback runs): the call fails with
/// `CallError::ServiceUnavailable` instead of hanging.
pub mod server_dies {
    use super::*;

    pub fn test(t: &Test) {
        let ctx = t.context();
        let node = ctx.create_node("test").unwrap();
        let client = Arc::new(node.create_client::<i64, i64>("/slow").unwrap());
        let mut peer = t.peer("slow_server");
        peer.expect("ready");
        assert!(client.wait_for_service(LONG));
        let c = client.clone();
        let call = std::thread::spawn(move || c.call(1, LONG));
        peer.expect("got request");
        peer.kill();
        let err = call.join().unwrap().unwrap_err();
        assert_eq!(err, CallError::ServiceUnavailable("/slow".into()));
    }

    pub fn peer(s: &Side) {
        let ctx = s.context();
        let node = ctx.create_node("peer").unwrap();
        let speaker = s.speaker();
        let _srv = node
            .create_service::<i64, i64>("/slow", move |_| {
                speaker.say("got request");
                hold()
            })
            .unwrap();
        let _spin = Spinning::new(&node);
        s.say("ready");
        s.until_told_to_exit();
    }
}
