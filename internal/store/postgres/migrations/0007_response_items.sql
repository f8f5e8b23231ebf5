-- The output items of stored responses by id, for item_reference input
-- items: one row per item, removed with its response.
CREATE TABLE response_items (
  org_id TEXT NOT NULL,
  item_id TEXT NOT NULL,
  response_id TEXT NOT NULL,
  item TEXT NOT NULL,
  PRIMARY KEY (org_id, item_id)
);
CREATE INDEX response_items_response ON response_items (response_id);
