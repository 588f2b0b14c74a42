//! `EventService` over gRPC: the event stream as one `EventBatch` per
//! revision with wanted events, plus heartbeat batches.

use std::pin::Pin;

use caravan_proto::event::Payload;
use caravan_proto::event_service_server::EventService;
use caravan_proto::{Event, EventBatch, EventStreamRequest, Job, Node};
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use crate::acl_guard::authorize;
use caravan_gateway_core::error::Result;
use caravan_gateway_core::events::{self, Change, Filter, Tick};
use caravan_gateway_core::gateway::Gateway;

/// The event stream API.
#[derive(Debug, Clone)]
pub struct EventApi(pub Gateway);

/// The stream of event batches.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<EventBatch, Status>> + Send + 'static>>;

/// The subscription a request asks for; errors name the field.
fn filter(req: &EventStreamRequest) -> Result<Filter> {
    let mut filter = Filter::default();
    for (i, topic) in req.topics.iter().enumerate() {
        filter.add_topic(&format!("topics[{i}]"), topic)?;
    }
    filter.set_namespace(&req.namespace);
    filter.set_index(req.index)?;
    Ok(filter.finish())
}

/// One change as a proto event; a deleted job or node carries only its ID
/// (and namespace). A service instance has no payload in the proto event
/// (its topic, type, key and namespace say which one changed; its details
/// are read from the registry).
fn event(change: Change) -> Event {
    let payload = match (change.object, change.topic) {
        (Some(payload), _) => Some(payload),
        (None, "Service") => None,
        (None, "Node") => Some(Payload::Node(Node {
            id: change.key.clone(),
            ..Default::default()
        })),
        (None, _) => Some(Payload::Job(Job {
            id: change.key.clone(),
            namespace: change.namespace.clone().unwrap_or_default(),
            ..Default::default()
        })),
    };
    Event {
        topic: change.topic.into(),
        r#type: change.kind.into(),
        key: change.key,
        namespace: change.namespace.unwrap_or_default(),
        index: change.revision,
        payload,
    }
}

/// The batches one tick of the subscription becomes.
fn batches(tick: Tick) -> Vec<EventBatch> {
    match tick {
        Tick::Events(revisions) => revisions
            .into_iter()
            .map(|rev| EventBatch {
                index: rev.index,
                events: rev.changes.into_iter().map(event).collect(),
                heartbeat: false,
            })
            .collect(),
        Tick::Heartbeat => vec![EventBatch {
            heartbeat: true,
            ..Default::default()
        }],
    }
}

#[tonic::async_trait]
impl EventService for EventApi {
    type StreamStream = EventStream;

    async fn stream(
        &self,
        request: Request<EventStreamRequest>,
    ) -> Result<Response<EventStream>, Status> {
        authorize(&self.0, &request)?;
        let mut filter = filter(request.get_ref())?;
        filter.acl = request
            .extensions()
            .get::<caravan_gateway_core::acl::Caller>()
            .map(|c| c.acl.clone());
        let ticks = events::subscribe(&self.0, filter).await?;
        let stream = ticks.flat_map(|tick| {
            let items: Vec<Result<EventBatch, Status>> = match tick {
                Ok(tick) => batches(tick).into_iter().map(Ok).collect(),
                Err(err) => vec![Err(err.into())],
            };
            futures::stream::iter(items)
        });
        Ok(Response::new(Box::pin(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_fields_are_named() {
        let req = EventStreamRequest {
            topics: vec!["Job:web".into(), "Bogus".into()],
            ..Default::default()
        };
        let status = Status::from(filter(&req).unwrap_err());
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(status.message().starts_with("topics[1]: "), "{status:?}");
        let req = EventStreamRequest {
            index: -3,
            ..Default::default()
        };
        let status = Status::from(filter(&req).unwrap_err());
        assert!(status.message().starts_with("index: "), "{status:?}");
        let all = filter(&EventStreamRequest::default()).unwrap();
        assert!(all.wants("Node", "n1", None));
        assert!(!all.wants("Job", "x", Some("other")));
    }

    #[test]
    fn a_deregistered_job_keeps_its_id_and_namespace() {
        let change = Change {
            topic: "Job",
            kind: "JobDeregistered",
            key: "web".into(),
            namespace: Some("prod".into()),
            revision: 9,
            object: None,
            filter_keys: Vec::new(),
        };
        let e = event(change);
        assert_eq!(e.r#type, "JobDeregistered");
        assert_eq!(e.index, 9);
        let Some(Payload::Job(job)) = e.payload else {
            panic!("no job payload: {e:?}");
        };
        assert_eq!((job.id.as_str(), job.namespace.as_str()), ("web", "prod"));
        let heartbeat = batches(Tick::Heartbeat);
        assert!(heartbeat[0].heartbeat && heartbeat[0].events.is_empty());
    }
}
