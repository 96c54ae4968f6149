//! A scripted MQTT 3.1.1 broker for misbehaviour no real broker offers on demand: accept a
//! client and drop it at once, never answer CONNECT, or stop reading mid-session. It
//! listens on `127.0.0.1:0`, serves each connection on a thread of its own, and records
//! every connection attempt (client id, when) so tests can see a client's backoff.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the broker does with a connection, after reading its CONNECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// CONNACK (accepted), then close the connection.
    AcceptThenDrop,
    /// Never answer: hold the connection open, reading nothing more.
    NeverConnack,
    /// CONNACK, SUBACK every SUBSCRIBE, acknowledge PUBLISH and PINGREQ for `answer`
    /// packets, then stop reading and answering while holding the connection open.
    StallAfter { answer: usize },
}

/// One connection attempt.
#[derive(Debug, Clone)]
pub struct Attempt {
    pub client_id: String,
    pub at: Instant,
}

/// A running scripted broker; its threads end with the test process.
pub struct ScriptedBroker {
    pub port: u16,
    attempts: Arc<Mutex<Vec<Attempt>>>,
}

impl ScriptedBroker {
    /// Serve every connection with `pick(n)`, where `n` counts connections from 0.
    pub fn start(pick: impl Fn(usize) -> Behaviour + Send + 'static) -> ScriptedBroker {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let log = attempts.clone();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { continue };
                let behaviour = pick(n);
                let log = log.clone();
                std::thread::spawn(move || serve(stream, behaviour, &log));
            }
        });
        ScriptedBroker { port, attempts }
    }

    /// `mqtt://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("mqtt://127.0.0.1:{}", self.port)
    }

    /// When each connection of `client_id` came, in order.
    pub fn attempts(&self, client_id: &str) -> Vec<Instant> {
        self.attempts
            .lock()
            .expect("attempts lock")
            .iter()
            .filter(|a| a.client_id == client_id)
            .map(|a| a.at)
            .collect()
    }

    /// Every client id seen.
    pub fn client_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .attempts
            .lock()
            .expect("attempts lock")
            .iter()
            .map(|a| a.client_id.clone())
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// One packet: its first byte (type and flags) and its body.
pub fn read_packet(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut byte = [0u8; 1];
    s.read_exact(&mut byte)?;
    let kind = byte[0];
    let (mut len, mut shift) = (0usize, 0);
    loop {
        s.read_exact(&mut byte)?;
        len |= usize::from(byte[0] & 0x7f) << shift;
        if byte[0] & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    let mut body = vec![0; len];
    s.read_exact(&mut body)?;
    Ok((kind, body))
}

/// A packet of `kind` (its first byte) around `body`.
pub fn packet(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![kind];
    let mut len = body.len();
    loop {
        let mut b = (len & 0x7f) as u8;
        len >>= 7;
        if len > 0 {
            b |= 0x80;
        }
        out.push(b);
        if len == 0 {
            break;
        }
    }
    out.extend_from_slice(body);
    out
}

/// The client id of a CONNECT body (protocol name, level, flags, keepalive, then the id).
fn client_id(connect: &[u8]) -> String {
    let name_len = usize::from(u16::from_be_bytes([connect[0], connect[1]]));
    let at = 2 + name_len + 4;
    let id_len = usize::from(u16::from_be_bytes([connect[at], connect[at + 1]]));
    String::from_utf8_lossy(&connect[at + 2..at + 2 + id_len]).into_owned()
}

fn serve(mut s: TcpStream, behaviour: Behaviour, log: &Mutex<Vec<Attempt>>) {
    let at = Instant::now();
    let Ok((kind, body)) = read_packet(&mut s) else {
        return;
    };
    if kind >> 4 != 1 {
        return;
    }
    log.lock().expect("attempts lock").push(Attempt {
        client_id: client_id(&body),
        at,
    });
    match behaviour {
        Behaviour::AcceptThenDrop => {
            let _ = s.write_all(&[0x20, 2, 0, 0]);
        }
        Behaviour::NeverConnack => hold(&s),
        Behaviour::StallAfter { answer } => {
            if s.write_all(&[0x20, 2, 0, 0]).is_err() {
                return;
            }
            for _ in 0..answer {
                let Ok((kind, body)) = read_packet(&mut s) else {
                    return;
                };
                let reply: Vec<u8> = match kind >> 4 {
                    8 => vec![0x90, 3, body[0], body[1], 1],
                    3 if kind & 0x06 != 0 => {
                        // QoS 1: the packet id follows the topic.
                        let t = usize::from(u16::from_be_bytes([body[0], body[1]]));
                        vec![0x40, 2, body[2 + t], body[3 + t]]
                    }
                    12 => vec![0xd0, 0],
                    14 => return,
                    _ => continue,
                };
                if s.write_all(&reply).is_err() {
                    return;
                }
            }
            hold(&s);
        }
    }
}

/// Keep the connection open without reading (the client's writes fill the socket buffers
/// and stop) until the client closes it with nothing unread, or for two minutes at most.
fn hold(s: &TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    let until = Instant::now() + Duration::from_secs(120);
    let mut probe = [0u8; 1];
    while Instant::now() < until {
        match s.peek(&mut probe) {
            Ok(0) => return,
            // Unread data: not reading it is the point; look again later.
            Ok(_) => std::thread::sleep(Duration::from_millis(200)),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}
