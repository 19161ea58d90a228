//! The running-slot limits, queue and lending, and the per-tree count.
use super::*;
use taskforce_agents::id::SessionId;

fn limits(per_parent: u32, total: u32, per_tree: u32) -> Arc<Limits> {
    Arc::new(Limits::new(&SubagentConfig {
        max_concurrent: per_parent,
        max_total: total,
        max_per_session: per_tree,
        ..SubagentConfig::default()
    }))
}

#[tokio::test]
async fn calls_over_the_parent_limit_wait_in_fifo_order() {
    let l = limits(2, 10, 100);
    let p = SessionId::new();
    let a = l.enqueue(&p, &SessionId::new()).admitted().await;
    let b = l.enqueue(&p, &SessionId::new()).admitted().await;
    let c = l.enqueue(&p, &SessionId::new());
    let d = l.enqueue(&p, &SessionId::new());
    assert!(!c.is_admitted() && !d.is_admitted());
    assert_eq!(l.counts(&p), (2, 2, 2));
    drop(a);
    assert!(c.is_admitted(), "the oldest waiter goes first");
    assert!(!d.is_admitted());
    drop(b);
    assert!(d.is_admitted());
    let (_c, _d) = (c.admitted().await, d.admitted().await);
    assert_eq!(l.counts(&p), (2, 2, 0));
}

#[tokio::test]
async fn the_total_limit_spans_parents_and_a_full_parent_blocks_no_one_else() {
    let l = limits(1, 2, 100);
    let (p, q, r) = (SessionId::new(), SessionId::new(), SessionId::new());
    let p1 = l.enqueue(&p, &SessionId::new()).admitted().await;
    let p2 = l.enqueue(&p, &SessionId::new());
    let q1 = l.enqueue(&q, &SessionId::new()).admitted().await;
    let r1 = l.enqueue(&r, &SessionId::new());
    assert!(!p2.is_admitted() && !r1.is_admitted());
    drop(q1);
    assert!(r1.is_admitted(), "p is full; r is next that fits");
    assert!(!p2.is_admitted());
    drop(p1);
    assert!(p2.is_admitted());
}

#[tokio::test]
async fn a_dropped_waiter_leaves_the_queue_and_a_granted_one_frees_its_slot() {
    let l = limits(1, 10, 100);
    let p = SessionId::new();
    let a = l.enqueue(&p, &SessionId::new()).admitted().await;
    let b = l.enqueue(&p, &SessionId::new());
    let c = l.enqueue(&p, &SessionId::new());
    drop(b);
    assert_eq!(l.counts(&p), (1, 1, 1));
    drop(a);
    assert!(c.is_admitted());
    drop(c);
    assert_eq!(l.counts(&p), (0, 0, 0));
}

#[test]
fn the_tree_count_fails_past_the_limit_and_gives_back_unkept_reservations() {
    let l = limits(1, 1, 2);
    let root = SessionId::new();
    l.seed_tree(&root, 1);
    let r = l.reserve(&root).unwrap();
    assert!(matches!(
        l.reserve(&root),
        Err(LimitError::TreeFull {
            created: 2,
            limit: 2
        })
    ));
    drop(r);
    l.reserve(&root).unwrap().keep();
    assert!(l.reserve(&root).is_err());
    assert!(l.reserve(&SessionId::new()).is_ok());
}

#[test]
fn a_deleted_trees_count_is_forgotten() {
    let l = limits(1, 1, 2);
    let (root, other) = (SessionId::new(), SessionId::new());
    l.seed_tree(&root, 2);
    l.seed_tree(&other, 0);
    l.forget_trees(std::slice::from_ref(&root));
    assert!(!l.knows_tree(&root));
    assert!(l.knows_tree(&other));
}

/// `child` admitted under `parent`, its slot held.
async fn running(l: &Arc<Limits>, parent: &SessionId, child: &SessionId) -> Slot {
    l.enqueue(parent, child).admitted().await
}

#[tokio::test]
async fn a_caller_lends_its_share_to_its_own_call_and_takes_it_back_after() {
    let l = limits(10, 1, 100);
    let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
    let _middle = running(&l, &root, &middle).await;
    assert_eq!(l.counts(&root).1, 1);
    let aside = l.step_aside(&middle);
    assert_eq!(l.counts(&root).1, 0, "lent while its call runs");
    let waiting = l.enqueue(&middle, &leaf);
    assert!(waiting.is_admitted(), "the leaf runs in the middle's share");
    let lease = Lease {
        aside: Some(aside),
        slot: Some(waiting.admitted().await),
        lent: None,
    };
    lease.end().await;
    assert_eq!(l.counts(&root), (1, 1, 0), "the middle runs again");
    assert_eq!(l.counts(&middle), (0, 1, 0));
}

#[tokio::test]
async fn a_returning_caller_goes_before_calls_that_waited_longer() {
    let l = limits(10, 1, 100);
    let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
    let middle_slot = running(&l, &root, &middle).await;
    let aside = l.step_aside(&middle);
    let leaf_slot = running(&l, &middle, &leaf).await;
    let other = l.enqueue(&SessionId::new(), &SessionId::new());
    assert!(!other.is_admitted());
    Lease {
        aside: Some(aside),
        slot: Some(leaf_slot),
        lent: None,
    }
    .end()
    .await;
    assert!(!other.is_admitted(), "the middle finishes its work first");
    drop(middle_slot);
    assert!(other.is_admitted());
    assert_eq!(l.counts(&root), (0, 1, 0));
}

#[tokio::test]
async fn the_share_comes_back_after_the_last_of_several_calls() {
    let l = limits(10, 2, 100);
    let (root, middle) = (SessionId::new(), SessionId::new());
    let _middle = running(&l, &root, &middle).await;
    let (a1, a2) = (l.step_aside(&middle), l.step_aside(&middle));
    assert_eq!(l.counts(&root).1, 0);
    let s1 = running(&l, &middle, &SessionId::new()).await;
    let s2 = running(&l, &middle, &SessionId::new()).await;
    Lease {
        aside: Some(a1),
        slot: Some(s1),
        lent: None,
    }
    .end()
    .await;
    assert_eq!(
        l.counts(&middle),
        (1, 1, 0),
        "still lent to the second call"
    );
    Lease {
        aside: Some(a2),
        slot: Some(s2),
        lent: None,
    }
    .end()
    .await;
    assert_eq!(l.counts(&middle), (0, 1, 0), "the middle's own share only");
}

#[tokio::test]
async fn a_call_cut_short_gives_everything_back_at_once() {
    let l = limits(10, 1, 100);
    let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
    let middle_slot = running(&l, &root, &middle).await;
    let aside = l.step_aside(&middle);
    let leaf_slot = running(&l, &middle, &leaf).await;
    // Its claim queued (no room while the leaf runs), then the call is cancelled.
    let claim = aside.claim();
    assert_eq!(l.counts(&root).2, 1, "the return waits");
    drop(claim);
    drop(leaf_slot);
    assert_eq!(
        l.counts(&root),
        (1, 1, 0),
        "no ticket left behind, the share is back"
    );
    drop(middle_slot);
    assert_eq!(l.counts(&root), (0, 0, 0));
    // A lease dropped whole (the caller's run ending) leaves nothing counted either.
    let middle_slot = running(&l, &root, &middle).await;
    let lease = Lease {
        aside: Some(l.step_aside(&middle)),
        slot: Some(running(&l, &middle, &leaf).await),
        lent: None,
    };
    drop(lease);
    drop(middle_slot);
    assert_eq!(l.counts(&root), (0, 0, 0));
    assert!(l.state().holders.is_empty());
}

#[tokio::test]
async fn a_root_caller_holds_no_share_and_lends_nothing() {
    let l = limits(10, 1, 100);
    let (root, child) = (SessionId::new(), SessionId::new());
    let aside = l.step_aside(&root);
    let slot = running(&l, &root, &child).await;
    let other = l.enqueue(&SessionId::new(), &SessionId::new());
    assert!(!other.is_admitted(), "nothing was lent: one slot, taken");
    Lease {
        aside: Some(aside),
        slot: Some(slot),
        lent: None,
    }
    .end()
    .await;
    assert!(other.is_admitted());
}

#[tokio::test]
async fn a_share_lent_to_background_children_is_given_up_with_the_slot() {
    let l = limits(10, 1, 100);
    let (root, middle, leaf) = (SessionId::new(), SessionId::new(), SessionId::new());
    let middle_slot = running(&l, &root, &middle).await;
    let lent = l.step_aside(&middle);
    let leaf_slot = running(&l, &middle, &leaf).await;
    assert_eq!(
        l.counts(&root),
        (1, 1, 0),
        "the leaf runs in the middle's share"
    );
    Lease {
        aside: None,
        slot: Some(middle_slot),
        lent: Some(lent),
    }
    .end()
    .await;
    assert_eq!(
        l.counts(&root),
        (0, 1, 0),
        "only the leaf counts: never two"
    );
    drop(leaf_slot);
    assert_eq!(l.counts(&root), (0, 0, 0));
    assert!(l.state().holders.is_empty());
}

#[tokio::test]
async fn in_a_cluster_a_full_node_places_calls_that_may_leave_elsewhere_at_once() {
    let l = limits(4, 1, 100);
    l.place_elsewhere();
    let p = SessionId::new();
    let here = l.enqueue_anywhere(&p, &SessionId::new()).admitted().await;
    assert!(
        !here.is_elsewhere(),
        "room on the node: the child runs here"
    );
    let away = l.enqueue_anywhere(&p, &SessionId::new());
    assert!(
        away.is_admitted(),
        "the node is full: admitted to run elsewhere"
    );
    let away = away.admitted().await;
    assert!(away.is_elsewhere());
    assert_eq!(
        l.counts(&p),
        (2, 1, 0),
        "the parent counts both, the node one"
    );
    let local_only = l.enqueue(&p, &SessionId::new());
    assert!(
        !local_only.is_admitted(),
        "a call that may not leave waits for room here"
    );
    drop(away);
    assert!(
        !local_only.is_admitted(),
        "a child run elsewhere frees no room here"
    );
    drop(here);
    assert!(local_only.is_admitted());
}

#[tokio::test]
async fn a_full_parent_keeps_its_calls_waiting_even_in_a_cluster() {
    let l = limits(1, 1, 100);
    l.place_elsewhere();
    let p = SessionId::new();
    let first = l.enqueue_anywhere(&p, &SessionId::new()).admitted().await;
    let second = l.enqueue_anywhere(&p, &SessionId::new());
    assert!(
        !second.is_admitted(),
        "max_concurrent counts a parent's children wherever they run"
    );
    drop(first);
    let second = second.admitted().await;
    assert!(!second.is_elsewhere());
}

#[tokio::test]
async fn work_from_the_cluster_takes_only_room_the_nodes_own_calls_leave() {
    let l = limits(4, 1, 100);
    let (p, q) = (SessionId::new(), SessionId::new());
    let running = l.enqueue(&p, &SessionId::new()).admitted().await;
    assert!(l.try_share().is_none(), "the node is full");
    let mine = l.enqueue(&q, &SessionId::new());
    let room = tokio::spawn({
        let l = l.clone();
        async move { l.room().await }
    });
    drop(running);
    assert!(
        mine.is_admitted(),
        "the node's own call takes the freed room"
    );
    assert!(!room.is_finished() && l.try_share().is_none());
    drop(mine);
    room.await.unwrap();
    let share = l.try_share().expect("room once the node's call is done");
    assert_eq!(l.counts(&p).1, 1, "the share counts in the node's total");
    let child = SessionId::new();
    let run = share.run(&child);
    assert_eq!(l.counts(&p).1, 1, "still one share, now the child's");
    // The taken child lends its share while it waits for calls of its own.
    let aside = l.step_aside(&child);
    let grandchild = l.enqueue(&child, &SessionId::new());
    assert!(grandchild.is_admitted());
    drop(grandchild);
    drop(aside);
    drop(run);
    assert_eq!(l.counts(&p).1, 0);
    assert!(
        l.enqueue(&p, &SessionId::new()).is_admitted(),
        "the share is free again"
    );
}

#[tokio::test]
async fn a_share_given_up_before_use_frees_its_room() {
    let l = limits(4, 1, 100);
    let share = l.try_share().unwrap();
    let p = SessionId::new();
    let waiting = l.enqueue(&p, &SessionId::new());
    assert!(!waiting.is_admitted());
    drop(share);
    assert!(waiting.is_admitted());
}
