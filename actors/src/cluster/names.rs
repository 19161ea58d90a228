//! The NATS names a cluster uses, all derived from its prefix, so that clusters with different
//! prefixes share a NATS server without seeing each other.

use taskforce_agents::config::check_cluster_name;
use taskforce_agents::id::SessionId;

use super::ClusterError;

/// The subjects, stream and bucket of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    prefix: String,
}

impl Names {
    /// The names for `prefix`; an error naming `[cluster] prefix` when it cannot name NATS
    /// subjects, streams and buckets.
    pub fn new(prefix: &str) -> Result<Names, ClusterError> {
        check_cluster_name(prefix).map_err(|message| ClusterError::Config {
            key: "prefix".into(),
            message,
        })?;
        Ok(Names {
            prefix: prefix.to_string(),
        })
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The JetStream stream holding every event: `PREFIX_EVENTS`.
    pub fn events_stream(&self) -> String {
        format!("{}_EVENTS", self.prefix)
    }

    /// The subjects of every event: `PREFIX.events.>`.
    pub fn events_subjects(&self) -> String {
        format!("{}.events.>", self.prefix)
    }

    /// The subject of the events of the session tree rooted at `root`: `PREFIX.events.<root>`.
    pub fn tree_subject(&self, root: &SessionId) -> String {
        format!("{}.events.{root}", self.prefix)
    }

    /// The subject of events that belong to no session: `PREFIX.events.global`.
    pub fn global_subject(&self) -> String {
        format!("{}.events.global", self.prefix)
    }

    /// The key-value bucket of node leases: `PREFIX_NODES`.
    pub fn nodes_bucket(&self) -> String {
        format!("{}_NODES", self.prefix)
    }

    /// The work queue's stream of child runs handed to the cluster: `PREFIX_WORK`.
    pub fn work_stream(&self) -> String {
        format!("{}_WORK", self.prefix)
    }

    /// The subject of child runs handed to the cluster: `PREFIX.work`.
    pub fn work_subject(&self) -> String {
        format!("{}.work", self.prefix)
    }

    /// The stream of reports on placed runs to their calling nodes: `PREFIX_PLACED`.
    pub fn placed_stream(&self) -> String {
        format!("{}_PLACED", self.prefix)
    }

    /// The subjects of every report on placed runs: `PREFIX.placed.>`.
    pub fn placed_subjects(&self) -> String {
        format!("{}.placed.>", self.prefix)
    }

    /// The subject of reports to the calling node `node`: `PREFIX.placed.<node>`.
    pub fn placed_subject(&self, node: &str) -> String {
        format!("{}.placed.{node}", self.prefix)
    }

    /// The subject of cancels sent to every node: `PREFIX.cancel`.
    pub fn cancel_subject(&self) -> String {
        format!("{}.cancel", self.prefix)
    }

    /// The subject of replies to asks held by another node: `PREFIX.ask`.
    pub fn ask_subject(&self) -> String {
        format!("{}.ask", self.prefix)
    }

    /// The subject on which `node` takes requests from other nodes: `PREFIX.node.<node>`.
    pub fn node_subject(&self, node: &str) -> String {
        format!("{}.node.{node}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_starts_with_the_prefix_and_a_bad_prefix_is_refused() {
        let names = Names::new("team-a").unwrap();
        assert_eq!(names.events_stream(), "team-a_EVENTS");
        assert_eq!(names.events_subjects(), "team-a.events.>");
        assert_eq!(names.global_subject(), "team-a.events.global");
        assert_eq!(names.nodes_bucket(), "team-a_NODES");
        assert_eq!(names.node_subject("n1"), "team-a.node.n1");
        assert_eq!(names.work_stream(), "team-a_WORK");
        assert_eq!(names.work_subject(), "team-a.work");
        assert_eq!(names.placed_stream(), "team-a_PLACED");
        assert_eq!(names.placed_subjects(), "team-a.placed.>");
        assert_eq!(names.placed_subject("n1"), "team-a.placed.n1");
        assert_eq!(names.cancel_subject(), "team-a.cancel");
        assert_eq!(names.ask_subject(), "team-a.ask");
        let root = SessionId::new();
        assert_eq!(names.tree_subject(&root), format!("team-a.events.{root}"));
        let err = Names::new("a.b").unwrap_err();
        assert!(err.to_string().contains("[cluster] prefix"), "{err}");
    }
}
