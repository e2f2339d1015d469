//! The harness's own tests: delivery, time, loss, flow control, closes, raw peers, dialing
//! and the timer-contract check.

use super::*;
use crate::{Dial, Dialer, Frame, Monotonic, Outbox, TimerSet};

/// Echoes every frame; sends "tick" to every connection every second.
#[derive(Default)]
struct Echo {
    out: Outbox<String>,
    conns: Vec<ConnId>,
    timers: TimerSet<u8>,
    clock: Monotonic,
}

impl Machine for Echo {
    type Event = String;
    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, now: Instant) {
        let now = self.clock.observe(now);
        self.conns.push(conn);
        self.timers.set(0, now + Duration::from_secs(1));
    }
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, now: Instant) {
        self.clock.observe(now);
        if let Frame::Text(t) = frame {
            self.out.event(format!("{conn:?}:{t}"));
            if t != "tick" {
                self.out.send(conn, FrameBuf::text(t.to_owned()));
            }
        }
    }
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.clock.observe(now);
        self.conns.retain(|c| *c != conn);
        self.out.event(format!("{conn:?}:gone"));
    }
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        while self.timers.pop_expired(now).is_some() {
            for c in &self.conns {
                self.out.send(*c, FrameBuf::text("tick"));
            }
            if !self.conns.is_empty() {
                self.timers.set(0, now + Duration::from_secs(1));
            }
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }
    fn poll_output(&mut self) -> Option<Output<String>> {
        self.out.pop()
    }
}

/// A broken machine whose deadline never moves.
struct Stuck(Instant);
impl Machine for Stuck {
    type Event = ();
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, _: ConnId, _: Frame<'_>, _: Instant) {}
    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        Some(self.0)
    }
    fn poll_output(&mut self) -> Option<Output<()>> {
        None
    }
}

#[allow(clippy::disallowed_methods)] // the one base time of a test
fn t0() -> Instant {
    Instant::now()
}

/// Dials at once, then 1 s after every failure or disconnect; gives up after 3 failures.
#[derive(Default)]
struct Redialer {
    out: Outbox<String>,
    retry_at: Option<Instant>,
    want: bool,
    failures: u32,
    clock: Monotonic,
}

impl Machine for Redialer {
    type Event = String;
    fn handle_connect(&mut self, conn: ConnId, _: &PeerInfo, now: Instant) {
        self.clock.observe(now);
        self.want = false;
        self.out.event(format!("up {conn:?}"));
    }
    fn handle_frame(&mut self, _: ConnId, _: Frame<'_>, _: Instant) {}
    fn handle_disconnect(&mut self, _: ConnId, now: Instant) {
        let now = self.clock.observe(now);
        self.retry_at = Some(now + Duration::from_secs(1));
    }
    fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock.observe(now);
        if self.retry_at.is_some_and(|t| t <= now) {
            self.retry_at = None;
            self.want = true;
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.retry_at
    }
    fn poll_output(&mut self) -> Option<Output<String>> {
        self.out.pop()
    }
}

impl Dialer for Redialer {
    fn poll_dial(&self) -> Dial {
        if self.failures >= 3 {
            Dial::Stop
        } else if self.want {
            Dial::Now
        } else {
            Dial::Wait
        }
    }
    fn handle_dial_failed(&mut self, _: &str, now: Instant) {
        let now = self.clock.observe(now);
        self.failures += 1;
        self.want = false;
        self.out.event("failed".to_owned());
        self.retry_at = Some(now + Duration::from_secs(1));
    }
}

/// Answers every frame with its wall clock's Unix milliseconds at that time.
struct Clocked {
    out: Outbox<()>,
    wall: crate::WallClock,
}

impl Machine for Clocked {
    type Event = ();
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, conn: ConnId, _: Frame<'_>, now: Instant) {
        let ms = self.wall.unix_ms(now);
        self.out.send(conn, FrameBuf::text(ms.to_string()));
    }
    fn handle_disconnect(&mut self, _: ConnId, _: Instant) {}
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<()>> {
        self.out.pop()
    }
    fn handle_wall_clock(&mut self, now: Instant, unix_ms: u64) {
        self.wall.set(now, unix_ms);
    }
}

#[test]
fn set_wall_clock_moves_the_machines_wall_time_and_not_their_deadlines() {
    let start = t0();
    let clocked = Clocked {
        out: Outbox::new(),
        wall: crate::WallClock::new(start, 1_000_000),
    };
    let mut sim: Sim<Clocked, Echo> = Sim::new(clocked, start, SimConfig::default());
    let r = sim.connect_raw(PeerInfo::new(None));
    let ask = |sim: &mut Sim<Clocked, Echo>| {
        sim.raw_send(r, FrameBuf::text("time?"));
        sim.settle();
        let got = sim.raw_take(r);
        got.last().and_then(|f| f.as_text()).map(str::to_owned)
    };
    sim.run_for(Duration::from_secs(2));
    assert_eq!(ask(&mut sim).as_deref(), Some("1002000"));
    // A suspend: the wall clock moved an hour, monotonic time did not.
    sim.set_wall_clock(1_002_000 + 3_600_000);
    assert_eq!(sim.now(), start + Duration::from_secs(2));
    assert_eq!(ask(&mut sim).as_deref(), Some("4602000"));
    sim.run_for(Duration::from_secs(1));
    assert_eq!(ask(&mut sim).as_deref(), Some("4603000"));
    // A correction backwards.
    sim.set_wall_clock(500);
    assert_eq!(ask(&mut sim).as_deref(), Some("500"));
}

#[test]
fn dialing_follows_the_machine_and_stops_when_it_says_so() {
    let start = t0();
    let mut sim: Sim<Echo, Redialer> = Sim::new(Echo::default(), start, SimConfig::default());
    sim.add_client(Redialer {
        want: true,
        ..Redialer::default()
    });
    // Reachable: one attempt, connected at once.
    sim.run_dialing_for(Duration::from_millis(10), |_| true);
    assert!(sim.is_connected(0));
    sim.disconnect(0);
    // Unreachable: a failed attempt every second after the first retry, then Stop.
    let mut tries = 0;
    sim.run_dialing_for(Duration::from_secs(10), |_| {
        tries += 1;
        false
    });
    assert_eq!(tries, 3);
    assert_eq!(sim.client(0).poll_dial(), Dial::Stop);
    assert!(!sim.is_connected(0));
    assert_eq!(sim.take_client_events(0).len(), 4); // up + three failures
}

#[test]
fn frames_flow_both_ways_with_latency() {
    let start = t0();
    let cfg = SimConfig::default().with_latency(Duration::from_millis(10));
    let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), start, cfg);
    let a = sim.add_client(Echo::default());
    sim.connect(a);
    sim.call_client(a, |m, _| {
        let c = m.conns[0];
        m.out.send(c, FrameBuf::text("hi"));
    });
    sim.run_for(Duration::from_millis(15));
    assert_eq!(sim.take_server_events().len(), 1);
    assert!(sim.take_client_events(a).is_empty(), "echo not back yet");
    sim.run_for(Duration::from_millis(10));
    let ev = sim.take_client_events(a);
    assert_eq!(ev.len(), 1);
    assert!(ev[0].ends_with(":hi"));
}

#[test]
fn timers_fire_and_disconnect_reaches_both_sides() {
    let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), SimConfig::default());
    let a = sim.add_client(Echo::default());
    sim.connect(a);
    sim.run_for(Duration::from_millis(3500));
    let ticks = sim
        .take_client_events(a)
        .iter()
        .filter(|e| e.ends_with(":tick"))
        .count();
    assert_eq!(ticks, 3);
    sim.disconnect(a);
    assert!(!sim.is_connected(a));
    assert!(sim
        .take_server_events()
        .iter()
        .any(|e| e.ends_with(":gone")));
}

#[test]
fn raw_peer_sees_server_frames_and_close() {
    let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), SimConfig::default());
    let r = sim.connect_raw(PeerInfo::new(None));
    sim.raw_send(r, FrameBuf::text("x"));
    sim.settle();
    assert_eq!(sim.raw_received(r)[0].as_text(), Some("x"));
    let conn = sim.raw_conn(r).expect("open");
    sim.call_server(|m, _| m.out.close(conn, CloseCode::POLICY, "bye"));
    sim.settle();
    assert_eq!(sim.raw_closed(r), Some((CloseCode::POLICY, "bye")));
    assert!(!sim.raw_is_open(r));
}

#[test]
fn loss_drops_frames_deterministically() {
    let run = |seed| {
        let cfg = SimConfig::default()
            .with_loss_per_mille(500)
            .with_seed(seed);
        let mut sim: Sim<Echo, Echo> = Sim::new(Echo::default(), t0(), cfg);
        let a = sim.add_client(Echo::default());
        sim.connect(a);
        sim.run_for(Duration::from_secs(100));
        sim.lost_frames()
    };
    let lost = run(7);
    assert!(lost > 10 && lost < 90, "{lost}");
    assert_eq!(lost, run(7));
}

#[test]
fn stuck_timer_is_reported_not_spun() {
    let start = t0();
    let mut sim: Sim<Stuck, Echo> = Sim::new(Stuck(start), start, SimConfig::default());
    let err = sim.try_run_for(Duration::from_secs(1)).unwrap_err();
    assert!(matches!(err, SimError::TimerStuck { .. }));
    let mut m = Stuck(start);
    assert!(check_timer_contract(&mut m, start, &[TimerInput::Timeout]).is_err());
}

#[test]
fn echo_keeps_the_timer_contract() {
    let start = t0();
    let inputs = vec![
        TimerInput::Connect,
        TimerInput::Timeout,
        TimerInput::Advance(Duration::from_millis(400)),
        TimerInput::Rewind(Duration::from_secs(3)),
        TimerInput::Timeout,
        TimerInput::FireDue,
        TimerInput::Frame(0, FrameBuf::text("a")),
        TimerInput::Disconnect(0),
        TimerInput::FireDue,
        TimerInput::Frame(0, FrameBuf::text("late")),
    ];
    check_timer_contract(&mut Echo::default(), start, &inputs).expect("contract");
}

/// Records frames; pauses the sender on "pause"; resumes on command.
#[derive(Default)]
struct Gate {
    out: Outbox<String>,
    seen: Vec<String>,
    ended: Vec<ConnId>,
}

impl Machine for Gate {
    type Event = String;
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        if let Frame::Text(t) = frame {
            self.seen.push(t.to_owned());
            if t == "pause" {
                self.out.pause_reading(conn);
            }
        }
    }
    fn handle_disconnect(&mut self, conn: ConnId, _: Instant) {
        self.ended.push(conn);
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<String>> {
        self.out.pop()
    }
    fn poll_flow(&mut self) -> Option<Flow> {
        self.out.pop_flow()
    }
}

#[test]
fn a_paused_connection_holds_its_frames_and_close_until_resumed() {
    let mut sim: Sim<Gate, Echo> = Sim::new(Gate::default(), t0(), SimConfig::default());
    let r = sim.connect_raw(PeerInfo::new(None));
    let conn = sim.raw_conn(r).expect("open");
    for t in ["a", "pause", "b", "c"] {
        sim.raw_send(r, FrameBuf::text(t));
    }
    sim.settle();
    assert_eq!(sim.server().seen, ["a", "pause"], "nothing after the pause");
    assert!(sim.is_server_paused(conn));
    assert_eq!(sim.held(), 2);
    // The peer closes behind its unread frames: the close waits too.
    sim.raw_disconnect_graceful(r);
    sim.settle();
    assert!(sim.server().ended.is_empty());
    assert_eq!(sim.held(), 3);

    sim.call_server(|m, _| m.out.resume_reading(conn));
    sim.settle();
    assert_eq!(sim.server().seen, ["a", "pause", "b", "c"], "in order");
    assert_eq!(sim.server().ended, [conn], "then the end");
    assert_eq!(sim.held(), 0);
    assert!(!sim.is_server_paused(conn));
}

/// Records pongs and how each connection ended; closes a connection that sends "bye"
/// with 4000 "see you".
#[derive(Default)]
struct Ends {
    out: Outbox<String>,
    log: Vec<String>,
}

impl Machine for Ends {
    type Event = String;
    fn handle_connect(&mut self, _: ConnId, _: &PeerInfo, _: Instant) {}
    fn handle_frame(&mut self, conn: ConnId, frame: Frame<'_>, _: Instant) {
        if frame == Frame::Text("bye") {
            self.out.close(conn, CloseCode(4000), "see you");
        }
    }
    fn handle_disconnect(&mut self, conn: ConnId, now: Instant) {
        self.handle_disconnect_with(conn, &Disconnect::Ended, now);
    }
    fn handle_disconnect_with(&mut self, _: ConnId, how: &Disconnect, _: Instant) {
        self.log.push(format!("end {how:?}"));
    }
    fn handle_pong(&mut self, _: ConnId, _: Instant) {
        self.log.push("pong".to_owned());
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn poll_output(&mut self) -> Option<Output<String>> {
        self.out.pop()
    }
}

#[test]
fn pongs_and_the_way_a_connection_ended_reach_both_sides() {
    let cfg = SimConfig::default().with_latency(Duration::from_millis(5));
    let mut sim: Sim<Ends, Ends> = Sim::new(Ends::default(), t0(), cfg);
    let c = sim.add_client(Ends::default());
    sim.connect(c);
    sim.pong(c);
    sim.pong_to_client(c);
    sim.settle();
    assert_eq!(sim.server().log, ["pong"]);
    assert_eq!(sim.client(c).log, ["pong"]);
    // The client closes: it sees its own close, the server the client's code and reason.
    sim.call_client(c, |m, _| {
        let conn = ConnId::new(2);
        m.out.close(conn, CloseCode(4001), "done");
    });
    sim.settle();
    let peer = Disconnect::peer(CloseCode(4001), "done");
    assert_eq!(
        sim.server().log,
        ["pong".to_owned(), format!("end {peer:?}")]
    );
    let local = Disconnect::local(CloseCode(4001), "done");
    assert_eq!(
        sim.client(c).log,
        ["pong".to_owned(), format!("end {local:?}")]
    );

    // A raw peer: a server-side close, a peer close with a long reason, a bare drop.
    let raws: Vec<usize> = (0..3)
        .map(|_| sim.connect_raw(PeerInfo::new(None)))
        .collect();
    sim.raw_pong(raws[0]);
    sim.raw_send(raws[0], FrameBuf::text("bye"));
    sim.raw_close(raws[1], CloseCode::GOING_AWAY, &"x".repeat(300));
    sim.raw_disconnect(raws[2]);
    sim.settle();
    assert_eq!(sim.raw_closed(raws[0]), Some((CloseCode(4000), "see you")));
    let log = &sim.server().log[2..];
    assert_eq!(log.len(), 4, "{log:?}");
    assert_eq!(
        log[0],
        format!("end {:?}", Disconnect::Ended),
        "the drop is at once"
    );
    assert_eq!(log[1], "pong");
    let local = Disconnect::local(CloseCode(4000), "see you");
    assert_eq!(log[2], format!("end {local:?}"));
    let cut = Disconnect::peer(CloseCode::GOING_AWAY, &"x".repeat(123));
    assert_eq!(
        log[3],
        format!("end {cut:?}"),
        "the reason is cut to 123 bytes"
    );
}
