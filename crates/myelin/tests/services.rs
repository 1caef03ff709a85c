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
