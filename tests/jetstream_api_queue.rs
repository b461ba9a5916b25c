//! The `$JS.API` queue is bounded (`jetstream { request_queue_limit }`, 10,000 by default, as
//! nats-server's): a client that sends requests faster than they are answered gets some of
//! them dropped, with nats-server's warning `JetStream API queue limit reached, dropping N
//! requests`, instead of growing the server's memory; the server answers again once the queue
//! has drained. Passes against nats-server 2.15.1 too
//! (`JSSERVER_TEST_BINARY=nats-server cargo test --test jetstream_api_queue`).

mod common;

use std::time::Duration;

use common::TestServer;
use futures_util::StreamExt as _;
use serde_json::{json, Value};

/// Stream creates sent at once, each making files: far more than a queue of 2 holds while the
/// first ones are written.
const BURST: usize = 300;

#[tokio::test]
async fn a_flood_of_api_requests_is_bounded_and_the_server_answers_after() {
    let mut server = TestServer::start_with_config(
        "jetstream { request_queue_limit: 2, sync_interval: always }\n",
        &["-js"],
    );
    let nc = async_nats::connect(server.url()).await.expect("connect");
    let inbox = nc.new_inbox();
    let mut replies = nc.subscribe(format!("{inbox}.*")).await.expect("subscribe");
    for i in 0..BURST {
        let body = json!({"name": format!("S{i}"), "subjects": [format!("s{i}.>")]});
        nc.publish_with_reply(
            format!("$JS.API.STREAM.CREATE.S{i}"),
            format!("{inbox}.{i}"),
            serde_json::to_vec(&body).unwrap().into(),
        )
        .await
        .expect("publish");
    }
    nc.flush().await.expect("flush");

    // Count the answers until none came for a while.
    let mut answered = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(3), replies.next()).await {
        answered += 1;
    }
    assert!(
        answered < BURST,
        "a queue of 2 cannot take {BURST} stream creates sent at once; all were answered"
    );
    let needle = "JetStream API queue limit reached, dropping";
    let log = server.wait_for_log(needle);
    let line = log.lines().find(|l| l.contains(needle)).expect("the line");
    assert!(
        line.contains("[WRN]") && line.ends_with(" requests"),
        "{line}"
    );

    // Drained: a request on its own is answered.
    let info = nc
        .request("$JS.API.INFO", "".into())
        .await
        .expect("the API answers again");
    let info: Value = serde_json::from_slice(&info.payload).expect("json");
    assert_eq!(
        info["type"],
        "io.nats.jetstream.api.v1.account_info_response"
    );
}
