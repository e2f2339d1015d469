//! Shared CRDT state across three `Agent`s and the `Orchestrator`, in simulated time over a
//! network whose deliveries are interleaved across connections in any order, with
//! connections dropped mid-flight (frames in flight are lost, the agent reconnects, gets a
//! full sync and sends its unanswered syncs again, so the server sees them twice). Whatever
//! happens, once the network is quiet every replica holds the server's state (same
//! `merkle_root`) and every increment is counted exactly once.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use agentwire_core::{
    ConnId, Dial, Dialer, Frame, FrameBuf, Machine, Output, PeerInfo, SequentialIds,
};
use mcpw_codec::agent::AgentEvent;
use mcpw_codec::orchestrator::{Orchestrator, OrchestratorConfig};
use mcpw_codec::{Agent, AgentCommandError, AgentConfig, AgentRegister};
use proptest::prelude::*;

#[allow(clippy::disallowed_methods)] // the one base time of a simulated run
fn t0() -> Instant {
    Instant::now()
}

fn frame_of(f: &FrameBuf) -> Frame<'_> {
    match f.as_text() {
        Some(t) => Frame::Text(t),
        None => Frame::Binary(f.as_bytes()),
    }
}

/// The orchestrator, the agents, and one FIFO queue per connection and direction.
struct Net {
    o: Orchestrator,
    agents: Vec<Agent>,
    conn: Vec<Option<ConnId>>,
    up: BTreeMap<ConnId, VecDeque<FrameBuf>>,
    down: BTreeMap<ConnId, VecDeque<FrameBuf>>,
    updates: Vec<usize>,
    now: Instant,
    next_conn: u64,
}

impl Net {
    fn new(n: usize, binary: bool) -> Self {
        let now = t0();
        let o = Orchestrator::new(OrchestratorConfig::default(), SequentialIds::new(1), now, 0);
        let agents = (0..n)
            .map(|i| {
                let register = AgentRegister {
                    agent_id: format!("agent-{i}"),
                    agent_type: None,
                    capabilities: Vec::new(),
                    model: None,
                    resources: None,
                    metadata: None,
                };
                Agent::new(
                    AgentConfig::new(register)
                        .with_binary(binary && i == 1)
                        .with_shared_state(true),
                )
            })
            .collect();
        let mut net = Self {
            o,
            agents,
            conn: vec![None; n],
            up: BTreeMap::new(),
            down: BTreeMap::new(),
            updates: vec![0; n],
            now,
            next_conn: 1,
        };
        for i in 0..n {
            net.dial(i);
        }
        net
    }

    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Some(out) = self.o.poll_output() {
                moved = true;
                match out {
                    Output::Send { conn, frame } => {
                        if let Some(q) = self.down.get_mut(&conn) {
                            q.push_back(frame);
                        }
                    }
                    Output::Close { conn, .. } => panic!("server closed {conn:?}"),
                    Output::Event(_) => {}
                }
            }
            for i in 0..self.agents.len() {
                while let Some(out) = self.agents[i].poll_output() {
                    moved = true;
                    match out {
                        Output::Send { conn, frame } => {
                            if let Some(q) = self.up.get_mut(&conn) {
                                q.push_back(frame);
                            }
                        }
                        Output::Close { .. } => panic!("agent {i} closed"),
                        Output::Event(AgentEvent::StateUpdated { .. }) => self.updates[i] += 1,
                        Output::Event(AgentEvent::ProtocolViolation(e)) => {
                            panic!("agent {i}: {e:?}")
                        }
                        Output::Event(_) => {}
                    }
                }
            }
            if !moved {
                return;
            }
        }
    }

    /// Connects agent `i` if it wants to dial now.
    fn dial(&mut self, i: usize) {
        if self.conn[i].is_some() || self.agents[i].poll_dial() != Dial::Now {
            return;
        }
        let c = ConnId::new(self.next_conn);
        self.next_conn += 1;
        self.conn[i] = Some(c);
        self.up.insert(c, VecDeque::new());
        self.down.insert(c, VecDeque::new());
        let peer = PeerInfo::new(None).with_subprotocol("mcp.v1");
        self.o.handle_connect(c, &peer, self.now);
        self.agents[i].handle_connect(c, &peer, self.now);
        self.pump();
    }

    /// Drops agent `i`'s connection with whatever is in flight on it.
    fn drop_conn(&mut self, i: usize) {
        let Some(c) = self.conn[i].take() else { return };
        self.up.remove(&c);
        self.down.remove(&c);
        self.o.handle_disconnect(c, self.now);
        self.agents[i].handle_disconnect(c, self.now);
        self.pump();
    }

    /// Delivers the next frame on agent `i`'s connection, up (to the server) or down.
    fn deliver(&mut self, i: usize, up: bool) -> bool {
        let Some(c) = self.conn[i] else { return false };
        let q = if up { &mut self.up } else { &mut self.down };
        let Some(f) = q.get_mut(&c).and_then(VecDeque::pop_front) else {
            return false;
        };
        if up {
            self.o.handle_frame(c, frame_of(&f), self.now);
        } else {
            self.agents[i].handle_frame(c, frame_of(&f), self.now);
        }
        self.pump();
        true
    }

    /// Lets time pass so that dropped agents redial.
    fn tick(&mut self, d: Duration) {
        self.now += d;
        self.o.handle_timeout(self.now);
        for a in &mut self.agents {
            a.handle_timeout(self.now);
        }
        self.pump();
        for i in 0..self.agents.len() {
            self.dial(i);
        }
    }

    /// Delivers everything, reconnecting dropped agents, until nothing moves.
    fn settle(&mut self) {
        self.pump();
        for _ in 0..1000 {
            let mut moved = false;
            for i in 0..self.agents.len() {
                while self.deliver(i, true) || self.deliver(i, false) {
                    moved = true;
                }
            }
            if self.conn.iter().any(Option::is_none) {
                self.tick(Duration::from_secs(1));
                moved = true;
            }
            if !moved {
                return;
            }
        }
        panic!("the network never settled");
    }
}

#[derive(Debug, Clone)]
enum Step {
    Inc { agent: usize, key: u8, by: u64 },
    Add { agent: usize, key: u8, element: u8 },
    Remove { agent: usize, key: u8, element: u8 },
    Deliver { agent: usize, up: bool, n: u8 },
    Drop { agent: usize },
    Tick,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0..3usize, 0u8..2, 1u64..4).prop_map(|(agent, key, by)| Step::Inc { agent, key, by }),
        3 => (0..3usize, 0u8..2, 0u8..3).prop_map(|(agent, key, element)| Step::Add { agent, key, element }),
        2 => (0..3usize, 0u8..2, 0u8..3).prop_map(|(agent, key, element)| Step::Remove { agent, key, element }),
        6 => (0..3usize, any::<bool>(), 1u8..4).prop_map(|(agent, up, n)| Step::Deliver { agent, up, n }),
        1 => (0..3usize).prop_map(|agent| Step::Drop { agent }),
        1 => Just(Step::Tick),
    ]
}

/// Runs `steps`, settles, and checks convergence; returns the net.
fn run(steps: &[Step], binary: bool) -> Result<Net, TestCaseError> {
    let mut net = Net::new(3, binary);
    net.settle();
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    for s in steps {
        match *s {
            Step::Inc { agent, key, by } => {
                let key = format!("count-{key}");
                match net.agents[agent].state_increment(&key, by) {
                    Ok(()) => *expected.entry(key).or_default() += by,
                    Err(AgentCommandError::StateNotReady | AgentCommandError::NotConnected) => {}
                    Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
                }
            }
            Step::Add {
                agent,
                key,
                element,
            } => {
                let _ = net.agents[agent].state_add(&format!("set-{key}"), &format!("e{element}"));
            }
            Step::Remove {
                agent,
                key,
                element,
            } => {
                let _ =
                    net.agents[agent].state_remove(&format!("set-{key}"), &format!("e{element}"));
            }
            Step::Deliver { agent, up, n } => {
                for _ in 0..n {
                    net.deliver(agent, up);
                }
            }
            Step::Drop { agent } => net.drop_conn(agent),
            Step::Tick => net.tick(Duration::from_secs(1)),
        }
        net.pump();
    }
    net.settle();
    let root = net.o.state().merkle_root();
    for (i, a) in net.agents.iter().enumerate() {
        prop_assert!(a.is_state_ready(), "agent {i} has its full sync");
        prop_assert_eq!(
            a.state().merkle_root(),
            root.clone(),
            "agent {} converged",
            i
        );
        prop_assert_eq!(a.state().clock(), net.o.state().clock());
    }
    for (key, total) in &expected {
        let got = net.o.state().counter(key).map_or(0, |c| c.value());
        prop_assert_eq!(got, *total, "{} counted once per increment", key);
    }
    Ok(net)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn three_agents_converge_whatever_the_interleaving_drops_and_resends(
        steps in proptest::collection::vec(step(), 0..60),
        binary in any::<bool>(),
    ) {
        run(&steps, binary)?;
    }
}

#[test]
fn a_change_reaches_the_other_agents_and_a_dropped_sync_is_sent_again() {
    let mut net = Net::new(3, false);
    net.settle();
    net.agents[0].state_increment("done", 2).unwrap();
    let tag = net.agents[0].state_add("active", "collab-xyz").unwrap();
    assert_eq!(tag, "agent-0-2");
    net.settle();
    for a in &net.agents {
        assert_eq!(a.state().counter("done").map(|c| c.value()), Some(2));
        assert!(a.state().set("active").unwrap().contains("collab-xyz"));
    }
    assert!(net.updates[1] >= 2 && net.updates[2] >= 2);
    // A sync lost with its connection is sent again after the reconnect's full sync, and
    // counted once.
    net.agents[1].state_increment("done", 5).unwrap();
    net.drop_conn(1);
    assert_eq!(net.o.state().counter("done").map(|c| c.value()), Some(2));
    net.settle();
    for a in &net.agents {
        assert_eq!(a.state().counter("done").map(|c| c.value()), Some(7));
    }
    // A remove names the tags agent 2 observed: everyone removes the same add.
    assert_eq!(net.agents[2].state_remove("active", "collab-xyz"), Ok(1));
    net.settle();
    for a in &net.agents {
        assert!(!a.state().set("active").unwrap().contains("collab-xyz"));
        assert_eq!(a.state().merkle_root(), net.o.state().merkle_root());
    }
}

#[test]
fn a_sync_refused_with_4002_is_sent_again_not_rolled_back() {
    let mut net = Net::new(2, false);
    net.settle();
    net.agents[0].state_increment("done", 3).unwrap();
    net.pump();
    // The server's rate limit refuses the sync: the frame never reaches it, the agent gets
    // 4002 with a wait.
    let c = net.conn[0].unwrap();
    let frame = net.up.get_mut(&c).unwrap().pop_front().unwrap();
    let (msg, _) = mcpw_codec::Codec::default()
        .decode_ws(frame_of(&frame))
        .unwrap();
    let refusal = serde_json::json!({"id": msg.id, "type": 3, "error": {"code": 4002,
        "message": "rate limit exceeded", "data": {"retry_after_ms": 500}}});
    net.down
        .get_mut(&c)
        .unwrap()
        .push_back(FrameBuf::text(refusal.to_string()));
    net.settle();
    assert_eq!(net.o.state().counter("done").map(|c| c.value()), None);
    assert_eq!(
        net.agents[0].state().counter("done").map(|c| c.value()),
        Some(3),
        "kept, not rolled back"
    );
    // After the wait it goes again, and everyone has it once.
    net.tick(Duration::from_millis(600));
    net.settle();
    for a in &net.agents {
        assert_eq!(a.state().counter("done").map(|c| c.value()), Some(3));
        assert_eq!(a.state().merkle_root(), net.o.state().merkle_root());
    }
}
