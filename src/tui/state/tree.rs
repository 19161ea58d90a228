//! The session tree as the tree panel shows it: each node with its status, agent, running
//! tool, and its own and rolled-up cost.

use super::{Mirror, SessionView};

/// One session in the tree, with what its subtree adds up to.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeNode {
    /// The session's id.
    pub id: String,
    /// The session's title.
    pub title: String,
    /// The agent it runs.
    pub agent: String,
    /// Whether its loop runs.
    pub busy: bool,
    /// The tool it runs now.
    pub tool: Option<String>,
    /// Its own cost, in dollars.
    pub cost: f64,
    /// Its cost with every descendant's.
    pub total_cost: f64,
    /// Its children, oldest first.
    pub children: Vec<TreeNode>,
}

/// A node of the tree flattened for a list: its depth and the node.
#[derive(Debug, Clone, PartialEq)]
pub struct TreeRow {
    /// How deep the node sits (0 for the root).
    pub depth: usize,
    /// The node (its `children` are the rows that follow).
    pub node: TreeNode,
}

impl Mirror {
    /// The tree rooted at `id`, as far as the sessions are known.
    pub fn tree(&self, id: &str) -> Option<TreeNode> {
        self.node(id, 0)
    }

    fn node(&self, id: &str, depth: usize) -> Option<TreeNode> {
        let view = self.session(id)?;
        let children: Vec<TreeNode> = if depth > self.sessions.len() {
            Vec::new()
        } else {
            self.children(id)
                .iter()
                .filter_map(|c| self.node(c.info.id.as_str(), depth + 1))
                .collect()
        };
        let cost = view.cost();
        Some(TreeNode {
            id: id.to_string(),
            title: view.info.title.clone(),
            agent: view.agent().unwrap_or("?").to_string(),
            busy: view.busy(),
            tool: view.running_tool().map(str::to_string),
            cost,
            total_cost: cost + children.iter().map(|c| c.total_cost).sum::<f64>(),
            children,
        })
    }

    /// Whether any session of the tree rooted at `id` runs (without building the tree: this is
    /// asked at every frame).
    pub fn any_busy(&self, id: &str) -> bool {
        let mut pending = vec![id];
        let mut seen = 0;
        while let Some(at) = pending.pop() {
            seen += 1;
            if self.session(at).is_some_and(SessionView::busy) {
                return true;
            }
            // The walk is bounded by the number of sessions, so a broken parent chain ends.
            if seen > self.sessions.len() {
                break;
            }
            pending.extend(
                self.children_of
                    .get(at)
                    .into_iter()
                    .flatten()
                    .map(String::as_str),
            );
        }
        false
    }

    /// The tree rooted at `id` as rows, depth first.
    pub fn tree_rows(&self, id: &str) -> Vec<TreeRow> {
        fn walk(node: &TreeNode, depth: usize, rows: &mut Vec<TreeRow>) {
            rows.push(TreeRow {
                depth,
                node: TreeNode {
                    children: Vec::new(),
                    ..node.clone()
                },
            });
            for child in &node.children {
                walk(child, depth + 1, rows);
            }
        }
        let mut rows = Vec::new();
        if let Some(root) = self.tree(id) {
            walk(&root, 0, &mut rows);
        }
        rows
    }

    /// The session `<leader>right` (`forward`) or `<leader>left` moves to from `id`: the next
    /// (previous) one of the family made of its parent and the parent's children (or, from a
    /// session with no parent, of itself and its children), wrapping around.
    pub fn cycle_child(&self, id: &str, forward: bool) -> Option<String> {
        let head = self
            .session(id)?
            .info
            .parent_id
            .as_ref()
            .map_or_else(|| id.to_string(), ToString::to_string);
        let mut family = vec![head.clone()];
        family.extend(self.children(&head).iter().map(|c| c.info.id.to_string()));
        if family.len() < 2 {
            return None;
        }
        let at = family.iter().position(|s| s == id)?;
        let next = if forward {
            (at + 1) % family.len()
        } else {
            (at + family.len() - 1) % family.len()
        };
        family.into_iter().nth(next)
    }

    /// The parent of `id`, for `<leader>up`.
    pub fn parent_of(&self, id: &str) -> Option<String> {
        self.session(id)?
            .info
            .parent_id
            .as_ref()
            .map(ToString::to_string)
    }
}
