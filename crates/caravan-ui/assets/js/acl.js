// What each API call needs when ACLs are on, so a 403 can say which
// capability the token lacks. The table follows the gateway's (and Nomad's)
// ACL rules for the endpoints this UI calls.

const NS = (cap) => (ns) => ({ kind: 'namespace', capability: cap, namespace: ns });
const NODE = (policy) => () => ({ kind: 'node', policy });
const AGENT = (policy) => () => ({ kind: 'agent', policy });
const OPERATOR = (policy) => () => ({ kind: 'operator', policy });
const VAR = (cap) => (ns, path) => ({ kind: 'variables', capability: cap, namespace: ns, path });
const MANAGEMENT = () => ({ kind: 'management' });
const TOKEN = () => ({ kind: 'token' });
const EXEC = (ns) => ({ kind: 'exec', namespace: ns });

// [method or '*', path pattern, need]
const RULES = [
  ['GET', /^\/v1\/jobs$/, NS('list-jobs')],
  ['POST', /^\/v1\/jobs\/parse$/, NS('parse-job')],
  ['*', /^\/v1\/jobs$/, NS('submit-job')],
  ['GET', /^\/v1\/job\/[^/]+\/scale$/, NS('read-job-scaling')],
  ['*', /^\/v1\/job\/[^/]+\/scale$/, NS('scale-job')],
  ['*', /^\/v1\/job\/[^/]+\/dispatch$/, NS('dispatch-job')],
  ['GET', /^\/v1\/job\//, NS('read-job')],
  ['*', /^\/v1\/job\//, NS('submit-job')],
  ['GET', /^\/v1\/(evaluations|evaluation\/|allocations|allocation\/|deployments|deployment\/)/, NS('read-job')],
  ['*', /^\/v1\/allocation\/[^/]+\/stop$/, NS('alloc-lifecycle')],
  ['*', /^\/v1\/deployment\//, NS('submit-job')],
  ['GET', /^\/v1\/client\/fs\/logs\//, NS('read-logs')],
  ['GET', /^\/v1\/client\/fs\//, NS('read-fs')],
  ['GET', /^\/v1\/client\/allocation\/[^/]+\/stats$/, NS('read-job')],
  ['*', /^\/v1\/client\/allocation\/[^/]+\/(signal|restart)$/, NS('alloc-lifecycle')],
  ['GET', /^\/v1\/client\/allocation\/[^/]+\/exec$/, EXEC],
  ['GET', /^\/v1\/(nodes|node\/)/, NODE('read')],
  ['*', /^\/v1\/node\//, NODE('write')],
  ['GET', /^\/v1\/agent\/members$/, NODE('read')],
  ['GET', /^\/v1\/agent\//, AGENT('read')],
  ['GET', /^\/v1\/operator\//, OPERATOR('read')],
  ['GET', /^\/v1\/vars$/, VAR('list')],
  ['GET', /^\/v1\/var\//, VAR('read')],
  ['DELETE', /^\/v1\/var\//, VAR('destroy')],
  ['*', /^\/v1\/var\//, VAR('write')],
  ['GET', /^\/v1\/acl\/token\/self$/, TOKEN],
  ['*', /^\/v1\/acl\//, MANAGEMENT],
];

/** What a call of `method` on `url` needs, or null when the table does not know it. */
export function needFor(method, url) {
  const u = new URL(url, window.location.origin);
  const ns = u.searchParams.get('namespace') || 'default';
  const varPath = decodeURIComponent(u.pathname.replace(/^\/v1\/var\//, ''));
  for (const [m, pattern, need] of RULES) {
    if ((m === '*' || m === method) && pattern.test(u.pathname)) return need(ns, varPath);
  }
  return null;
}

/** The need in words, as an ACL policy would grant it. */
export function describeNeed(need) {
  if (!need) return 'a capability this token does not have';
  switch (need.kind) {
    case 'namespace': {
      const where = need.namespace === '*' ? 'in any namespace' : `in namespace "${need.namespace}"`;
      return `the "${need.capability}" capability ${where} (namespace "${need.namespace === '*' ? '*' : need.namespace}" { capabilities = ["${need.capability}"] })`;
    }
    case 'exec':
      return `the "alloc-exec" capability in namespace "${need.namespace}", and "alloc-node-exec" too for a task whose driver does not isolate it from the node, such as raw_exec (namespace "${need.namespace}" { capabilities = ["alloc-exec", "alloc-node-exec"] })`;
    case 'node':
      return `node ${need.policy} access (node { policy = "${need.policy}" })`;
    case 'agent':
      return `agent ${need.policy} access (agent { policy = "${need.policy}" })`;
    case 'operator':
      return `operator ${need.policy} access (operator { policy = "${need.policy}" })`;
    case 'variables':
      return `the "${need.capability}" capability on variables at "${need.path || '*'}" in namespace "${need.namespace}" (namespace "${need.namespace}" { variables { path "${need.path || '*'}" { capabilities = ["${need.capability}"] } } })`;
    case 'management':
      return 'a management token';
    case 'token':
      return 'a token (not the anonymous one)';
    default:
      return 'a capability this token does not have';
  }
}
