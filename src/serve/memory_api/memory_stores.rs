//! The routes of memory stores themselves: create, list, retrieve, update, archive, delete, each
//! store a store of the data directory labelled with a name, description and metadata.

use super::*;
use crate::serve::stores::Created;
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewStore {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

pub(super) const NEW_STORE: &str =
    r#"{"name": "Notes of user 1042", "description": "...", "metadata": {"user": "1042"}}"#;

pub(super) fn check_label(label: &Label) -> Result<(), ApiError> {
    label::check_name(&label.name)
        .or_else(|| label::check_description(&label.description))
        .or_else(|| label::check_metadata(&label.metadata))
        .map_or(Ok(()), |why| Err(ApiError::InvalidRequest(why)))
}

pub(super) async fn create_store(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let bytes = read(sent).await?;
    let asked: NewStore = body(&bytes, NEW_STORE)?;
    let now = now_ms();
    let label = Label {
        name: asked.name,
        description: asked.description,
        metadata: asked.metadata,
        created_ms: now,
        updated_ms: now,
        archived_ms: None,
    };
    check_label(&label)?;
    run(move || {
        // 26 random hex digits: a store name no one chose, so ids do not collide.
        let name =
            crate::client::token::random_hex(13).map_err(|e| ApiError::Api(e.to_string()))?;
        match stores.create(&name) {
            Ok(Created::Made) => {}
            Ok(Created::Exists | Created::InTheWay | Created::Deleted) => {
                return Err(ApiError::Api("a fresh store name was taken; retry".into()));
            }
            Err(why) => return Err(unavailable(&stores, &ids::store_id(&name), why)),
        }
        let dir = resolve(&stores, &ids::store_id(&name))?.1;
        let (_, served) = open(&stores, &ids::store_id(&name))?;
        label::record(&served, &dir, &label).map_err(store_failed)?;
        Ok(ok(&store_object(&name, label)))
    })
    .await
}

#[derive(Deserialize)]
pub(super) struct StoreQuery {
    limit: Option<usize>,
    page: Option<String>,
    include_archived: Option<bool>,
    created_at_gte: Option<String>,
    created_at_lte: Option<String>,
}

/// A time filter's milliseconds.
pub(super) fn time_filter(name: &str, value: Option<&str>) -> Result<Option<u64>, ApiError> {
    value
        .map(|text| {
            parse_rfc3339(text).ok_or_else(|| {
                ApiError::InvalidRequest(format!(
                    "{name} must be an RFC 3339 time such as 2026-12-04T08:00:00Z, not {text:?}"
                ))
            })
        })
        .transpose()
}

pub(super) async fn list_stores(
    State(stores): State<Arc<Stores>>,
    headers: HeaderMap,
    query: ApiQuery<StoreQuery>,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let limit = limit(query.limit, 20, 100)?;
    let after = query.page.as_deref().map(wire::page_key).transpose()?;
    let from = time_filter("created_at_gte", query.created_at_gte.as_deref())?;
    let to = time_filter("created_at_lte", query.created_at_lte.as_deref())?;
    let archived = query.include_archived.unwrap_or(false);
    run(move || {
        let mut found = Vec::new();
        let mut cursor = after;
        let mut more = false;
        'scan: loop {
            let (names, rest) = match stores.fleet() {
                // A fleet's node lists the fleet's stores, wherever each is held.
                Some(fleet) => fleet.stores_page(cursor.as_deref(), 100).map_err(|e| {
                    ApiError::Api(format!(
                        "the fleet's bucket could not be listed ({e}); retry"
                    ))
                })?,
                None => crate::store::data_dir::list(stores.dir(), cursor.as_deref(), 100)
                    .map_err(|e| ApiError::Api(format!("the data directory: {e}")))?,
            };
            for name in names {
                cursor = Some(name.clone());
                let label = match stores.fleet() {
                    Some(fleet) => fleet_label(fleet.bucket(), &name),
                    None => {
                        let Some(dir) = crate::store::data_dir::store_dir(stores.dir(), &name)
                        else {
                            continue;
                        };
                        label::listed(&dir, &name)
                    }
                };
                let shown = (archived || label.archived_ms.is_none())
                    && from.is_none_or(|from| label.created_ms >= from)
                    && to.is_none_or(|to| label.created_ms <= to);
                if !shown {
                    continue;
                }
                if found.len() == limit {
                    more = true;
                    break 'scan;
                }
                found.push(store_object(&name, label));
            }
            if !rest {
                break;
            }
        }
        let next_page = more
            .then(|| {
                found
                    .last()
                    .map(|s| wire::page_token(ids::store_name(&s.id).unwrap_or("")))
            })
            .flatten();
        Ok(ok(&Page {
            data: found,
            next_page,
        }))
    })
    .await
}

/// The label the list of stores shows for the fleet's store `name`: the latest copy its holders
/// kept in the bucket, or for a store whose label none kept (made without the API), one named
/// after the store, created when its first lease was taken. One store's unreadable copy never
/// keeps the others from the list.
fn fleet_label(bucket: &crate::fleet::bucket::Bucket, name: &str) -> Label {
    match label::in_bucket(bucket, name) {
        Ok(Some(label)) => label,
        _ => label::unlabelled_in_fleet(bucket, name),
    }
}

pub(super) async fn retrieve_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    attribution: Attribution,
) -> Result<Response, ApiError> {
    credentials(&stores, &headers)?;
    run(move || {
        let (name, dir) = resolve(&stores, &id)?;
        let (_, served) = open(&stores, &id)?;
        if stores.operator_refusal(&headers).is_some() {
            // An agent token sees its own store only.
            who(&stores, &served, &id, &headers, &attribution)?;
        }
        let label = label::current(&served, &dir, &name).map_err(store_failed)?;
        Ok(ok(&store_object(&name, label)))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StoreChange {
    name: Option<String>,
    description: Option<String>,
    metadata: Option<BTreeMap<String, Option<String>>>,
}

pub(super) const STORE_CHANGE: &str =
    r#"{"name": "...", "description": "...", "metadata": {"user": "1042", "old-key": null}}"#;

/// Serializes changes to labels: each is read, changed and written whole.
pub(super) static LABELS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Reads the label of the store `id` names, lets `change` change it, and writes it back.
pub(super) fn relabel(
    stores: &Stores,
    id: &str,
    change: impl FnOnce(&mut Label) -> Result<(), ApiError>,
) -> Result<Response, ApiError> {
    let _one = LABELS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (name, dir) = resolve(stores, id)?;
    let (_, served) = open(stores, id)?;
    let mut label = label::current(&served, &dir, &name).map_err(store_failed)?;
    change(&mut label)?;
    label.updated_ms = now_ms().max(label.created_ms);
    check_label(&label)?;
    label::record(&served, &dir, &label).map_err(store_failed)?;
    Ok(ok(&store_object(&name, label)))
}

pub(super) fn refuse_archived(label: &Label) -> Result<(), ApiError> {
    match label.archived_ms {
        Some(ms) => Err(ApiError::InvalidRequest(format!(
            "the memory store was archived at {} and can no longer be changed; its memories can still be read",
            utc(ms)
        ))),
        None => Ok(()),
    }
}

pub(super) async fn update_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
    sent: HttpBody,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    let bytes = read(sent).await?;
    let asked: StoreChange = body(&bytes, STORE_CHANGE)?;
    run(move || {
        relabel(&stores, &id, |label| {
            refuse_archived(label)?;
            if let Some(name) = asked.name {
                label.name = name;
            }
            if let Some(description) = asked.description {
                label.description = description;
            }
            for (key, value) in asked.metadata.unwrap_or_default() {
                match value {
                    Some(value) => label.metadata.insert(key, value),
                    None => label.metadata.remove(&key),
                };
            }
            Ok(())
        })
    })
    .await
}

pub(super) async fn archive_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    run(move || {
        relabel(&stores, &id, |label| {
            refuse_archived(label)?;
            label.archived_ms = Some(now_ms());
            Ok(())
        })
    })
    .await
}

pub(super) async fn delete_store(
    State(stores): State<Arc<Stores>>,
    RoutePath(id): RoutePath<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    operator(&stores, &headers)?;
    run(move || {
        let (name, _) = resolve(&stores, &id)?;
        stores
            .delete(&name)
            .map_err(|(status, why)| match status.as_u16() {
                404 => no_store(&id),
                409 => ApiError::Conflict(why),
                _ => ApiError::Api(why),
            })?;
        Ok(ok(&Deleted {
            kind: "memory_store_deleted",
            id,
        }))
    })
    .await
}
