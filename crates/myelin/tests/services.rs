//! Services and clients, intra-process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use myelin::prelude::*;
use myelin::{CallError, CreateServiceError, MultiThreadedExecutor, ServiceOptions};

fn ctx() -> Context {
    Context::builder()
        .handle_signals(false)
        .shared_memory(false)
        .build()
        .unwrap()
}

/// Spin `exec` on a thread until dropped.
struct Spinning {
    stop: myelin::StopHandle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Spinning {
    fn new(mut exec: Executor) -> Self {
        let stop = exec.stop_handle();
        let thread = Some(std::thread::spawn(move || exec.spin().unwrap()));
        Spinning { stop, thread }
    }
}

impl Drop for Spinning {
    fn drop(&mut self) {
        self.stop.stop();
        self.thread.take().unwrap().join().unwrap();
    }
}

#[derive(Clone, Debug, myelin::Message)]
struct Blob {
    id: u64,
    owned: Vec<u8>,
    shared: Arc<Vec<u8>>,
}

#[test]
fn a_request_and_its_response_travel_without_copies() {
    let ctx = ctx();
    let node = ctx.create_node("server").unwrap();
    let seen = Arc::new(Mutex::new(None));
    let s2 = seen.clone();
    let _srv = node
        .create_service::<Blob, Blob>("echo", move |b: Blob| {
            *s2.lock().unwrap() =
                Some((b.owned.as_ptr() as usize, Arc::as_ptr(&b.shared) as usize));
            b // moved back
        })
        .unwrap();
    let client = node.create_client::<Blob, Blob>("echo").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    let owned = vec![1u8; 1 << 20];
    let shared = Arc::new(vec![2u8; 1 << 20]);
    let (op, sp) = (owned.as_ptr() as usize, Arc::as_ptr(&shared) as usize);
    let back = client
        .call(
            Blob {
                id: 7,
                owned,
                shared,
            },
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(back.id, 7);
    assert_eq!(
        *seen.lock().unwrap(),
        Some((op, sp)),
        "the server saw the caller's buffers"
    );
    assert_eq!(
        (
            back.owned.as_ptr() as usize,
            Arc::as_ptr(&back.shared) as usize
        ),
        (op, sp)
    );
}

#[test]
fn eight_concurrent_callers_each_get_their_own_answer() {
    let ctx = ctx();
    let node = ctx.create_node("server").unwrap();
    let _srv = node
        .create_service::<u64, u64>("double", |x: u64| {
            std::thread::yield_now();
            x * 2
        })
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let stop = exec.stop_handle();
    let spinner = std::thread::spawn(move || exec.spin());
    let callers: Vec<_> = (0..8u64)
        .map(|k| {
            let client = node.create_client::<u64, u64>("double").unwrap();
            std::thread::spawn(move || {
                for i in 0..200u64 {
                    let x = k * 1_000_000 + i;
                    assert_eq!(client.call(x, Duration::from_secs(60)).unwrap(), 2 * x);
                }
            })
        })
        .collect();
    for c in callers {
        c.join().unwrap();
    }
    stop.stop();
    spinner.join().unwrap().unwrap();
}

#[test]
fn no_server_is_a_timeout_error_naming_the_service() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let client = node.create_client::<u8, u8>("nobody").unwrap();
    assert!(!client.wait_for_service(Duration::from_millis(20)));
    match client.call(1, Duration::from_millis(30)) {
        Err(CallError::NoServer { service, .. }) => assert_eq!(service, "/nobody"),
        other => panic!("expected NoServer, got {other:?}"),
    }
}

#[test]
fn wait_for_service_sees_a_server_that_appears_later() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let client = node.create_client::<u8, u8>("late").unwrap();
    let n2 = node.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        n2.create_service::<u8, u8>("late", |x| x).unwrap()
    });
    assert!(client.wait_for_service(Duration::from_secs(30)));
    drop(h.join().unwrap());
}

#[test]
fn a_server_dropped_with_a_request_pending_answers_service_unavailable_promptly() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    // No executor: the request stays pending in the server's queue.
    let srv = node.create_service::<u8, u8>("slow", |x| x).unwrap();
    let client = node.create_client::<u8, u8>("slow").unwrap();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        drop(srv);
    });
    let t0 = Instant::now();
    let err = client.call(1, Duration::from_secs(60)).unwrap_err();
    assert_eq!(err, CallError::ServiceUnavailable("/slow".into()));
    assert!(t0.elapsed() < Duration::from_secs(60));
    h.join().unwrap();
}

#[test]
fn a_panicking_server_answers_with_an_error_and_keeps_serving() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _srv = node
        .create_service::<u32, u32>("fragile", |x: u32| {
            if x == 13 {
                panic!("unlucky {x}");
            }
            x + 1
        })
        .unwrap();
    let client = node.create_client::<u32, u32>("fragile").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    assert_eq!(
        client.call(13, Duration::from_secs(30)).unwrap_err(),
        CallError::ServerPanicked {
            service: "/fragile".into(),
            message: "unlucky 13".into()
        }
    );
    assert_eq!(client.call(1, Duration::from_secs(30)).unwrap(), 2);
}

#[test]
fn a_call_from_a_callback_on_a_single_threaded_executor_does_not_deadlock() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _srv = node
        .create_service::<u32, u32>("inc", |x: u32| x + 1)
        .unwrap();
    let client = node.create_client::<u32, u32>("inc").unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    // The subscription's callback calls the service served by the same
    // (single-threaded) executor.
    let _sub = node
        .create_subscription("go", QoS::keep_all(), move |x: u32| {
            g.lock()
                .unwrap()
                .push(client.call(x, Duration::from_secs(30)));
        })
        .unwrap();
    let p = node.create_publisher::<u32>("go", QoS::keep_all()).unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    for i in 0..5 {
        p.publish(i).unwrap();
    }
    exec.spin_until(Duration::from_secs(30), || got.lock().unwrap().len() == 5)
        .unwrap();
    let got: Vec<_> = got
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.clone().unwrap())
        .collect();
    assert_eq!(got, vec![1, 2, 3, 4, 5]);
}

#[test]
fn a_call_into_the_callers_own_exclusive_group_is_refused_not_deadlocked() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _srv = node
        .create_service::<u32, u32>("inc", |x: u32| x + 1)
        .unwrap();
    let client = node.create_client::<u32, u32>("inc").unwrap();
    let got = Arc::new(Mutex::new(None));
    let g = got.clone();
    let _sub = node
        .create_subscription("go", QoS::keep_all(), move |x: u32| {
            *g.lock().unwrap() = Some(client.call(x, Duration::from_secs(30)));
        })
        .unwrap();
    node.create_publisher::<u32>("go", QoS::keep_all())
        .unwrap()
        .publish(1)
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    exec.add_node(&node).unwrap();
    let g2 = got.clone();
    exec.spin_until(Duration::from_secs(30), move || {
        g2.lock().unwrap().is_some()
    })
    .unwrap();
    assert!(matches!(
        got.lock().unwrap().clone(),
        Some(Err(CallError::WouldDeadlock { .. }))
    ));
}

#[test]
fn several_servers_share_the_requests_and_each_is_answered_once() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let counts: Vec<_> = (0..2).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let servers: Vec<_> = counts
        .iter()
        .map(|c| {
            let c = c.clone();
            node.create_service::<u32, u32>("work", move |x: u32| {
                c.fetch_add(1, Ordering::SeqCst);
                x
            })
            .unwrap()
        })
        .collect();
    let client = node.create_client::<u32, u32>("work").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    for i in 0..10 {
        assert_eq!(client.call(i, Duration::from_secs(30)).unwrap(), i);
    }
    assert_eq!(
        counts[0].load(Ordering::SeqCst) + counts[1].load(Ordering::SeqCst),
        10
    );
    assert_eq!(counts[0].load(Ordering::SeqCst), 5, "round robin");
    drop(servers);
}

#[test]
fn call_async_resolves_to_the_answer() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _srv = node
        .create_service::<u32, u32>("sq", |x: u32| x * x)
        .unwrap();
    let client = node.create_client::<u32, u32>("sq").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    let answers = futures::executor::block_on(async {
        let a = client.call_async(3);
        let b = client.call_async(4);
        (a.await.unwrap(), b.await.unwrap())
    });
    assert_eq!(answers, (9, 16));
    let none = node.create_client::<u32, u32>("missing").unwrap();
    assert!(matches!(
        futures::executor::block_on(none.call_async(1)),
        Err(CallError::NoServer { .. })
    ));
}

#[test]
fn an_inline_service_answers_in_the_callers_thread() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let caller = std::thread::current().id();
    let _srv = node
        .create_service_with::<u32, u32>("here", ServiceOptions::inline(), move |x: u32| {
            assert_eq!(std::thread::current().id(), caller);
            x + 10
        })
        .unwrap();
    let client = node.create_client::<u32, u32>("here").unwrap();
    assert_eq!(client.call(1, Duration::from_secs(5)).unwrap(), 11);
}

#[test]
fn service_names_and_types_are_checked() {
    let ctx = ctx();
    let node = ctx.create_node("n").unwrap();
    let _srv = node.create_service::<u32, u32>("s", |x| x).unwrap();
    assert!(matches!(
        node.create_client::<String, u32>("s"),
        Err(CreateServiceError::TypeMismatch { .. })
    ));
    assert!(matches!(
        node.create_service::<u32, u32>("bad name", |x| x),
        Err(CreateServiceError::InvalidName(_))
    ));
    assert_eq!(
        node.service_names_and_types(),
        vec![("/s".to_string(), "uint32 -> uint32".to_string())]
    );
}

#[test]
fn a_service_chain_nested_on_a_multi_threaded_executor_answers_every_call() {
    // A timer calls /rpc_0, whose server calls /rpc_1, ... /rpc_4. Callers
    // spin nested while waiting; with two workers the answer is often
    // produced by the *other* worker, and the nested spin must notice it
    // (it used to sleep until the call's timeout).
    let ctx = ctx();
    let hops = 5;
    let mut nodes = Vec::new();
    let mut servers = Vec::new();
    for i in (0..hops).rev() {
        let node = ctx.create_node(&format!("server_{i}")).unwrap();
        let name = format!("/rpc_{i}");
        if i + 1 == hops {
            servers.push(node.create_service::<u64, u64>(&name, |r| r).unwrap());
        } else {
            let next = node
                .create_client::<u64, u64>(&format!("/rpc_{}", i + 1))
                .unwrap();
            servers.push(
                node.create_service::<u64, u64>(&name, move |r| {
                    next.call(r, Duration::from_secs(20)).unwrap_or(u64::MAX)
                })
                .unwrap(),
            );
        }
        nodes.push(node);
    }
    let src = ctx.create_node("src").unwrap();
    let c0 = src.create_client::<u64, u64>("/rpc_0").unwrap();
    let answers = Arc::new(Mutex::new(Vec::new()));
    let a = answers.clone();
    let mut seq = 0;
    let _t = src
        .create_timer(Duration::from_millis(1), move || {
            if seq < 300 {
                a.lock()
                    .unwrap()
                    .push(c0.call(seq, Duration::from_secs(20)));
                seq += 1;
            }
        })
        .unwrap();
    let mut exec = MultiThreadedExecutor::new(2);
    for n in nodes.iter().chain([&src]) {
        exec.add_node(n).unwrap();
    }
    let a2 = answers.clone();
    exec.spin_until(Duration::from_secs(120), move || {
        a2.lock().unwrap().len() >= 300
    })
    .unwrap();
    let answers = answers.lock().unwrap();
    assert_eq!(answers.len(), 300);
    for (i, r) in answers.iter().enumerate() {
        assert_eq!(r, &Ok(i as u64));
    }
    drop(servers);
}

/// A deferred server keeps the reply and answers from another thread
/// after the callback returned; the executor serves other requests
/// meanwhile (here the second call is answered first).
#[test]
fn a_deferred_server_answers_later_from_any_thread() {
    let ctx = ctx();
    let node = ctx.create_node("later").unwrap();
    let held = Arc::new(Mutex::new(Vec::<myelin::ServiceReply<i64>>::new()));
    let h = held.clone();
    let _srv = node
        .create_deferred_service::<i64, i64>("later", move |x, reply| {
            if x == 1 {
                h.lock().unwrap().push(reply); // answered below
            } else {
                reply.send(x * 10);
            }
        })
        .unwrap();
    let client = Arc::new(node.create_client::<i64, i64>("later").unwrap());
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    let c = client.clone();
    let first = std::thread::spawn(move || c.call(1, Duration::from_secs(60)));
    while held.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(client.call(2, Duration::from_secs(60)).unwrap(), 20);
    let reply = held.lock().unwrap().pop().unwrap();
    assert_eq!(reply.service(), "/later");
    std::thread::spawn(move || reply.send(11)).join().unwrap();
    assert_eq!(first.join().unwrap().unwrap(), 11);
}

/// A reply dropped unanswered fails the call at once (not at its
/// timeout); a deferred handler that panics fails it as a panic.
#[test]
fn a_deferred_reply_dropped_or_panicked_fails_the_call_promptly() {
    let ctx = ctx();
    let node = ctx.create_node("later").unwrap();
    let _srv = node
        .create_deferred_service::<i64, i64>("forgetful", move |x, reply| {
            if x < 0 {
                panic!("negative");
            }
            drop(reply);
        })
        .unwrap();
    let client = node.create_client::<i64, i64>("forgetful").unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spin = Spinning::new(exec);
    assert_eq!(
        client.call(1, Duration::from_secs(3600)),
        Err(CallError::NotAnswered("/forgetful".into()))
    );
    assert!(matches!(
        client.call(-1, Duration::from_secs(3600)),
        Err(CallError::ServerPanicked { .. })
    ));
    // The server goes on.
    assert_eq!(
        client.call(2, Duration::from_secs(3600)),
        Err(CallError::NotAnswered("/forgetful".into()))
    );
}

/// Service introspection: with `Contents` on the server and the client,
/// one call publishes the four events of ROS 2 on
/// `/<service>/_service_event` (`AddTwoInts_Event`): the client's
/// REQUEST_SENT and RESPONSE_RECEIVED, the server's REQUEST_RECEIVED and
/// RESPONSE_SENT, all with the client's gid and the request's number, the
/// request in the request events and the response in the response
/// events; the bytes of a request event are ROS 2's layout (the request
/// realigned after the event's header). `Metadata` leaves the contents
/// out, `Off` publishes nothing, and a service made without a ROS type
/// says why it cannot.
#[test]
fn introspection_publishes_the_four_events_of_a_call() {
    use myelin::dynamic::{Value, decode};
    use myelin::introspection::{REQUEST_RECEIVED, REQUEST_SENT, RESPONSE_RECEIVED, RESPONSE_SENT};
    use myelin::{IntrospectionError, ServiceIntrospection};
    use myelin_msgs::example_interfaces::{AddTwoInts, AddTwoIntsRequest, AddTwoIntsResponse};

    let ctx = ctx();
    let node = ctx.create_node("introspected").unwrap();
    let server = node
        .create_service_for::<AddTwoInts>("adder", |r: AddTwoIntsRequest| AddTwoIntsResponse {
            sum: r.a + r.b,
        })
        .unwrap();
    let client = node.create_client_for::<AddTwoInts>("adder").unwrap();
    let event_type = "example_interfaces/srv/AddTwoInts_Event";
    let ty =
        myelin::RawType::ros(event_type, &myelin_msgs::ros_hash_of(event_type).unwrap()).unwrap();
    let events = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let e = events.clone();
    let _sub = node
        .create_raw_subscription(
            "/adder/_service_event",
            &ty,
            QoS::keep_last(100),
            Default::default(),
            move |m: myelin::AnyMessage| e.lock().unwrap().push(m.bytes().to_vec()),
        )
        .unwrap();
    let mut exec = Executor::new();
    exec.add_node(&node).unwrap();
    let _spinning = Spinning::new(exec);
    let described = myelin_msgs::describe("example_interfaces/srv/AddTwoInts").unwrap();
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while events.lock().unwrap().len() < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::mem::take(&mut *events.lock().unwrap())
    };
    let qos = QoS::keep_last(10);

    // Off (the default): a call publishes nothing.
    let call = |a, b| {
        client
            .call(AddTwoIntsRequest { a, b }, Duration::from_secs(60))
            .unwrap()
    };
    assert_eq!(call(1, 1).sum, 2);

    server
        .configure_introspection(ServiceIntrospection::Contents, qos)
        .unwrap();
    client
        .configure_introspection(ServiceIntrospection::Contents, qos)
        .unwrap();
    assert_eq!(call(2, 3).sum, 5);
    let got = wait_for(4);
    assert_eq!(got.len(), 4, "four events");
    let decoded: Vec<Value> = got
        .iter()
        .map(|b| decode(&described.description, event_type, b).unwrap())
        .collect();
    let info = |v: &Value, f: &str| v.field("info").unwrap().field(f).unwrap().clone();
    let mut kinds: Vec<u8> = decoded
        .iter()
        .map(|v| match info(v, "event_type") {
            Value::UInt8(k) => k,
            other => panic!("event_type {other:?}"),
        })
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            REQUEST_SENT,
            REQUEST_RECEIVED,
            RESPONSE_SENT,
            RESPONSE_RECEIVED
        ]
    );
    for v in &decoded {
        assert_eq!(
            info(v, "client_gid"),
            info(&decoded[0], "client_gid"),
            "one client"
        );
        // The second request of this client.
        assert_eq!(info(v, "sequence_number"), Value::Int64(2));
        let (req, resp) = (v.field("request").unwrap(), v.field("response").unwrap());
        match info(v, "event_type") {
            Value::UInt8(REQUEST_SENT | REQUEST_RECEIVED) => {
                let Value::Sequence(r) = req else {
                    panic!("{req:?}")
                };
                assert_eq!(r[0].field("a"), Some(&Value::Int64(2)));
                assert_eq!(r[0].field("b"), Some(&Value::Int64(3)));
                assert_eq!(resp, &Value::Sequence(vec![]));
            }
            _ => {
                let Value::Sequence(r) = resp else {
                    panic!("{resp:?}")
                };
                assert_eq!(r[0].field("sum"), Some(&Value::Int64(5)));
                assert_eq!(req, &Value::Sequence(vec![]));
            }
        }
    }
    // The bytes of a request event as ROS 2 lays them out, written by
    // hand: the request's int64s move to offset 48 (8-aligned from the
    // start of the event), not 44 where they would follow the count.
    let request_sent = got
        .iter()
        .zip(&decoded)
        .find(|(_, v)| info(v, "event_type") == Value::UInt8(REQUEST_SENT))
        .map(|(b, _)| b.clone())
        .unwrap();
    let mut expected = vec![0, 1, 0, 0, REQUEST_SENT, 0, 0, 0];
    expected.extend_from_slice(&request_sent[8..16]); // the stamp
    expected.extend_from_slice(&request_sent[16..32]); // the gid
    expected.extend([0u8; 4]); // padding to 8
    expected.extend(2i64.to_le_bytes()); // sequence_number
    expected.extend(1u32.to_le_bytes()); // one request
    expected.extend([0u8; 4]); // padding to 8
    expected.extend(2i64.to_le_bytes());
    expected.extend(3i64.to_le_bytes());
    expected.extend(0u32.to_le_bytes()); // no response
    assert_eq!(request_sent, expected);

    // Metadata: the same events without contents.
    server
        .configure_introspection(ServiceIntrospection::Metadata, qos)
        .unwrap();
    client
        .configure_introspection(ServiceIntrospection::Metadata, qos)
        .unwrap();
    assert_eq!(call(4, 5).sum, 9);
    let got = wait_for(4);
    assert_eq!(got.len(), 4);
    for b in &got {
        let v = decode(&described.description, event_type, b).unwrap();
        assert_eq!(v.field("request"), Some(&Value::Sequence(vec![])));
        assert_eq!(v.field("response"), Some(&Value::Sequence(vec![])));
        assert_eq!(info(&v, "sequence_number"), Value::Int64(3));
    }

    // Off again, on the server only: the client's two events remain.
    server
        .configure_introspection(ServiceIntrospection::Off, qos)
        .unwrap();
    assert_eq!(call(6, 7).sum, 13);
    let got = wait_for(2);
    assert_eq!(got.len(), 2);
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        events.lock().unwrap().is_empty(),
        "the server published after Off"
    );

    // A service made without a ROS service type cannot be introspected
    // (turning it off is fine).
    let plain = node.create_service::<i64, i64>("plain", |x| x).unwrap();
    plain
        .configure_introspection(ServiceIntrospection::Off, qos)
        .unwrap();
    assert!(matches!(
        plain.configure_introspection(ServiceIntrospection::Contents, qos),
        Err(IntrospectionError::NoServiceType(name)) if name == "/plain"
    ));
}
