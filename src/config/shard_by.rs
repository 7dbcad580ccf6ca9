//! `shard_by:` as written in the config, on a queue or an informer.

use serde::Deserialize;

use crate::informer::ShardBy;

/// `shard_by:` as written.
#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case", expecting = "`uid` or `namespace`")]
pub(super) enum ShardByDoc {
    Uid,
    Namespace,
}

impl From<ShardByDoc> for ShardBy {
    fn from(doc: ShardByDoc) -> ShardBy {
        match doc {
            ShardByDoc::Uid => ShardBy::Uid,
            ShardByDoc::Namespace => ShardBy::Namespace,
        }
    }
}
