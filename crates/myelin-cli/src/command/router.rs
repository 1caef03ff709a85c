//! `myelin router`: zenoh's router (the `zenoh` crate's, in this process)
//! for myelin and ROS 2 rmw_zenoh processes.

use std::io::Write;
use std::sync::mpsc;

use crate::cli::RouterArgs;

type Res = Result<(), Box<dyn std::error::Error>>;

/// Run until Ctrl-C.
pub fn run(args: RouterArgs) -> Res {
    let cfg =
        myelin_zenoh::config::router_config(args.config.as_deref(), &args.listen, &args.connect)?;
    let session = myelin_zenoh::config::open(cfg)?;
    let listen = if args.listen.is_empty() && args.config.is_none() {
        vec![myelin_zenoh::config::DEFAULT_ROUTER.to_string()]
    } else {
        args.listen.clone()
    };
    // Whoever reads our output may stop reading: never fail on it.
    let mut out = std::io::stdout();
    let _ = writeln!(
        out,
        "zenoh router {} listening on {}",
        session.zid(),
        listen.join(", ")
    );
    if !args.connect.is_empty() {
        let _ = writeln!(out, "connecting to {}", args.connect.join(", "));
    }
    let _ = writeln!(out, "Ctrl-C to stop");
    let (tx, rx) = mpsc::channel();
    ctrlc::set_handler(move || {
        let _ = tx.send(());
    })?;
    let _ = rx.recv();
    use myelin_zenoh::zenoh::Wait;
    session.close().wait().map_err(|e| e.to_string())?;
    Ok(())
}
