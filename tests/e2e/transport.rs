//! The native client's transport against a server that closes a kept-alive
//! connection behind the client's back (as llama.cpp's server does after a
//! streamed answer while announcing Keep-Alive): the request that meets the closed
//! socket is resent on a fresh connection, and nothing is counted twice or lost.
//!
//! The server here is a raw TCP listener, so the close is deterministic: the first
//! connection to carry a second completion request reads it and closes without a
//! byte of answer; everything else is answered.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{run, text};

const SSE: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\n\
                   data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"}}]}\n\n\
                   data: [DONE]\n\n";

/// Read one HTTP request (head + Content-Length body); its method, None at EOF.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<String> {
    let mut len = 0usize;
    let mut first = true;
    let mut method = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if first && line.trim().is_empty() {
            continue;
        }
        if first {
            method = line.split(' ').next().unwrap_or_default().to_owned();
        }
        first = false;
        let l = line.to_ascii_lowercase();
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok().map(|()| method)
}

fn answer(s: &mut TcpStream) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: {}\r\n\r\n",
        SSE.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(SSE.as_bytes()).unwrap();
    s.flush().unwrap();
}

/// The server; returns its base URL and counters (connections, completion requests
/// answered, completion requests dropped).
fn start() -> (String, Arc<[AtomicUsize; 3]>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    let counts: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let c = counts.clone();
    std::thread::spawn(move || {
        let dropped_once = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for conn in l.incoming() {
            let Ok(conn) = conn else { continue };
            let dropped_once = dropped_once.clone();
            c[0].fetch_add(1, Ordering::SeqCst);
            let c = c.clone();
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                let mut posts = 0;
                while let Some(method) = read_request(&mut r) {
                    if method == "POST" {
                        posts += 1;
                    }
                    if posts == 2 && !dropped_once.swap(true, Ordering::SeqCst) {
                        // The close behind the client's back: the request was read,
                        // no answer is written.
                        c[2].fetch_add(1, Ordering::SeqCst);
                        let _ = w.shutdown(std::net::Shutdown::Both);
                        return;
                    }
                    if method == "POST" {
                        c[1].fetch_add(1, Ordering::SeqCst);
                    }
                    answer(&mut w);
                }
            });
        }
    });
    (url, counts)
}

#[test]
fn a_request_on_a_connection_the_server_closed_is_resent_once() {
    let (url, counts) = start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = run(&[
        "bench",
        "--url",
        &url,
        "--model",
        "m",
        "--no-preflight",
        // Only the measured requests reach the server (no /tokenize probe, no
        // template measurement).
        "--tokenizer",
        "approx",
        "--concurrency",
        "1",
        "--requests",
        "4",
        "--rounds",
        "1",
        "--warmup",
        "0",
        "--quiet",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let level = &report["levels"][0];
    assert_eq!(level["sent"], 4, "{level}");
    assert_eq!(level["ok"], 4, "every request succeeded: {level}");
    assert_eq!(level["errors"], 0, "{level}");
    let [conns, answered, dropped] = &*counts;
    eprintln!("connections {conns:?}, answered {answered:?}, dropped {dropped:?}");
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the server dropped one request"
    );
    assert_eq!(
        answered.load(Ordering::SeqCst),
        4,
        "4 answers, no request sent twice after an answer"
    );
    assert!(
        conns.load(Ordering::SeqCst) >= 2,
        "the resend used a fresh connection"
    );
}
