//! Status as the control protocol reports it: serde types that `oaed`
//! writes and `oaectl`, the demo and the tests read, so both sides agree on
//! every field by construction.

use oae_proto::DownReason;
use serde::{Deserialize, Serialize};

/// `oaectl status`: the dataplane and every link of every queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DataplaneStatus {
    pub name: String,
    /// This dataplane's node id (`node_id` in its configuration).
    #[serde(default)]
    pub node_id: u64,
    pub pid: u32,
    pub epoch: u32,
    pub queues: Vec<QueueStatus>,
}

impl DataplaneStatus {
    /// Every link, with its queue.
    pub fn links(&self) -> impl Iterator<Item = (&QueueStatus, &LinkStatus)> + '_ {
        self.queues
            .iter()
            .flat_map(|q| q.links.iter().map(move |l| (q, l)))
    }

    /// At least one link, and every link up.
    pub fn all_up(&self) -> bool {
        self.queues.iter().all(QueueStatus::all_up) && self.links().next().is_some()
    }
}

/// Static facts about the queue, for status reports.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct QueueInfo {
    pub index: u16,
    pub iface: String,
    pub queue_id: u32,
    pub core: Option<usize>,
    pub driver: String,
    pub mac: String,
    /// The queue finds its neighbours (docs/PROTOCOL.md, "Discovery"): its
    /// links are those found so far.
    #[serde(default)]
    pub discovers: bool,
}

/// One queue: its polling core and its links.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueStatus {
    pub queue: QueueInfo,
    /// `oae` or `rc-model`.
    pub transport: String,
    pub links: Vec<LinkStatus>,
    pub in_flight: usize,
    pub workload_running: bool,
    /// The fabric over the queue's links, if it runs one.
    #[serde(default)]
    pub fabric: Option<FabricStatus>,
}

/// `oaectl members --json`: the fabric of one queue that runs one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueFabric {
    pub queue: u16,
    pub fabric: FabricStatus,
}

/// `oaectl members`: one queue's view of the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricStatus {
    pub view: u64,
    /// Live members: node id and incarnation (epoch), by node id.
    pub members: Vec<(u64, u32)>,
    /// Every usable neighbour advertises this same view.
    pub agreed: bool,
    pub routes: Vec<RouteStatus>,
    pub paths: Vec<PathStatus>,
    /// Transfers this queue initiated whose outcome it does not know yet,
    /// over links and paths.
    pub in_doubt: usize,
    /// Words of the dataplane's memory locked by tentative transfers.
    pub locked_words: usize,
    /// Counters by name (`oae_proto::FabricStats`).
    pub counters: std::collections::BTreeMap<String, u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteStatus {
    pub node: u64,
    pub epoch: u32,
    pub hops: u8,
    /// The link it leaves through.
    pub via: u16,
}

/// An end-to-end path to a node, relayed through the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathStatus {
    pub node: u64,
    pub up: bool,
    pub srtt_ns: u64,
}

impl QueueStatus {
    pub fn all_up(&self) -> bool {
        !self.links.is_empty() && self.links.iter().all(|l| l.state.up)
    }
}

/// One link of a queue.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkStatus {
    /// Its number on the queue: the queue's peers in configuration order,
    /// or the order its neighbours were found in.
    pub link: u16,
    pub peer_mac: String,
    /// The peer's node id, once the link has heard it.
    pub peer_node: Option<u64>,
    #[serde(flatten)]
    pub state: LinkState,
}

/// What a transport says of one of its links.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkState {
    pub up: bool,
    /// Words of the dataplane's memory held by tentative transfers.
    pub locked_words: usize,
    #[serde(flatten)]
    pub protocol: ProtocolStatus,
}

impl LinkState {
    /// The OAE state machine's part, if the link runs OAE.
    pub fn oae(&self) -> Option<&OaeLinkStatus> {
        match &self.protocol {
            ProtocolStatus::Oae(oae) => Some(oae),
            ProtocolStatus::RcModel(_) => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProtocolStatus {
    Oae(OaeLinkStatus),
    RcModel(RcStatus),
}

/// An OAE link's state machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OaeLinkStatus {
    pub unreachable: bool,
    pub knowledge: String,
    pub role: String,
    pub epoch: u32,
    pub peer_epoch: u32,
    pub peer_id: u64,
    pub srtt_ns: u64,
    pub round_ns: u64,
    pub active_slots: u16,
    pub peer_credits: u16,
    pub credits_in_use: u16,
    pub tentative: u16,
    pub receive_credits: u16,
    pub queued_verbs: usize,
    /// Receives posted for the peer's SENDs and not yet filled.
    #[serde(default)]
    pub posted_receives: usize,
    /// Transfers this node initiated whose outcome it does not know yet.
    pub in_doubt: usize,
    /// While the link is not up: why it is not coming up, when the frames
    /// it received and dropped tell (`null` otherwise, e.g. while the peer
    /// is silent).
    #[serde(default)]
    pub down_reason: Option<DownReasonStatus>,
    /// The identity the peer proved, on a link whose keys are agreed by
    /// identity (64 hex digits), once a handshake finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_identity: Option<String>,
}

impl OaeLinkStatus {
    /// The line `oaectl status` prints under a link that is not coming
    /// up for a reason its frames tell.
    pub fn down_line(&self) -> Option<String> {
        self.down_reason
            .as_ref()
            .map(|d| format!("not coming up: {d}"))
    }
}

/// Why a link is not coming up ([`DownReason`]): `reason` is its stable
/// name and `code` its stable number (match on either, never on `text`),
/// `text` what the link received and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DownReasonStatus {
    #[serde(with = "reason_name")]
    pub reason: DownReason,
    pub code: u8,
    /// Frames in a row, the last dropped, that told it.
    pub frames: u32,
    pub text: String,
}

impl From<(DownReason, u32)> for DownReasonStatus {
    fn from((reason, frames): (DownReason, u32)) -> DownReasonStatus {
        DownReasonStatus {
            reason,
            code: reason.code(),
            frames,
            text: reason.text().to_string(),
        }
    }
}

impl core::fmt::Display for DownReasonStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{} (code {}, {} frames): {}",
            self.reason.name(),
            self.code,
            self.frames,
            self.text
        )
    }
}

/// A [`DownReason`] as its stable name.
mod reason_name {
    use oae_proto::DownReason;
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(r: &DownReason, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(r.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DownReason, D::Error> {
        let name = String::deserialize(d)?;
        DownReason::from_name(&name)
            .ok_or_else(|| D::Error::custom(format!("no link down reason named '{name}'")))
    }
}

/// The RC model's queue pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RcStatus {
    pub qp_failure: Option<String>,
    pub in_flight: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_transports_read_back_as_they_were_written() {
        let rc = LinkState {
            up: true,
            locked_words: 0,
            protocol: ProtocolStatus::RcModel(RcStatus {
                qp_failure: None,
                in_flight: 3,
            }),
        };
        let text = serde_json::to_string(&rc).unwrap();
        let back: LinkState = serde_json::from_str(&text).unwrap();
        assert!(matches!(
            back.protocol,
            ProtocolStatus::RcModel(RcStatus { in_flight: 3, .. })
        ));
        let oae = LinkState {
            up: false,
            locked_words: 2,
            protocol: ProtocolStatus::Oae(OaeLinkStatus {
                unreachable: true,
                knowledge: "Unknown".into(),
                role: "Initiator".into(),
                epoch: 1,
                peer_epoch: 2,
                peer_id: 3,
                srtt_ns: 4,
                round_ns: 5,
                active_slots: 6,
                peer_credits: 7,
                credits_in_use: 8,
                tentative: 9,
                receive_credits: 10,
                queued_verbs: 11,
                posted_receives: 1,
                in_doubt: 12,
                down_reason: Some((DownReason::SameIdentity, 4).into()),
                peer_identity: Some("ab".repeat(32)),
            }),
        };
        let v = serde_json::to_value(&oae).unwrap();
        assert_eq!(v["in_doubt"], 12, "flattened: {v}");
        assert_eq!(v["down_reason"]["reason"], "same_identity", "{v}");
        assert_eq!(v["down_reason"]["code"], 5, "{v}");
        let back: LinkState = serde_json::from_value(v).unwrap();
        let ProtocolStatus::Oae(o) = back.protocol else {
            panic!("an OAE link")
        };
        assert_eq!(o.in_doubt, 12);
        assert_eq!(
            o.down_reason.as_ref().map(|d| (d.reason, d.frames)),
            Some((DownReason::SameIdentity, 4))
        );
        let line = o.down_line().unwrap();
        assert!(
            line.starts_with("not coming up: same_identity (code 5, 4 frames): ")
                && line.contains("node_id"),
            "{line}"
        );
    }

    /// Every reason reads back as itself; an unknown name is refused, not
    /// taken for another.
    #[test]
    fn down_reasons_read_back_by_name() {
        for r in DownReason::ALL {
            let v = serde_json::to_value(DownReasonStatus::from((r, 3))).unwrap();
            assert_eq!(v["reason"], r.name());
            let back: DownReasonStatus = serde_json::from_value(v).unwrap();
            assert_eq!(back.reason, r);
        }
        let unknown =
            serde_json::json!({"reason": "gremlins", "code": 99, "frames": 1, "text": ""});
        let err = serde_json::from_value::<DownReasonStatus>(unknown).unwrap_err();
        assert!(err.to_string().contains("gremlins"), "{err}");
    }
}
