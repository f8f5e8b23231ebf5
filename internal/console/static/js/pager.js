// pager shows a cursor-paged list in box: fetch(after) answers a page
// {data, last_id, has_more}; view(rows) renders all rows loaded so far.
import {h, replace} from './dom.js';

export async function pager(box, fetch, view) {
  const rows = [];
  let after = '';
  async function more() {
    try {
      const page = await fetch(after);
      rows.push(...page.data);
      after = page.last_id || after;
      const next = page.has_more ? h('button', {type: 'button', class: 'quiet', onclick: more}, 'Load more') : null;
      replace(box, view(rows), next);
    } catch (err) {
      replace(box, h('p', {class: 'msg error'}, err.message));
    }
  }
  await more();
}
