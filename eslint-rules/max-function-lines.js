import fs from 'node:fs';
import path from 'node:path';

/**
 * `local/max-function-lines`: a function longer than `max` lines is an error, unless it is listed by name
 * for its file in the offenders file (`offenders`, a JSON object: file path → names). The list records the
 * functions that were longer when the rule came in, and it may only shrink: a listed function that is no
 * longer too long, or no longer exists, is an error too, so that a name leaves the list once its function
 * has been split.
 *
 * A function's name is the one a reader would search for: a declaration's or a variable's name,
 * `Class.method`, an object property's key, or for a callback `callee(first string argument)` (so a test
 * is `it(its title)`). Nested functions are counted on their own; anonymous ones take their enclosing
 * function's name with ` > (anonymous)`.
 */

const loaded = new Map();

function offendersFrom(file) {
  if (!loaded.has(file)) loaded.set(file, JSON.parse(fs.readFileSync(file, 'utf8')));
  return loaded.get(file);
}

function keyName(key) {
  if (!key) return null;
  if (key.type === 'Identifier' || key.type === 'PrivateIdentifier') return key.name;
  if (key.type === 'Literal') return String(key.value);
  return null;
}

function calleeText(callee, source) {
  return source.getText(callee).replace(/\s+/g, '');
}

function firstStringArgument(call) {
  const first = call.arguments[0];
  if (first && first.type === 'Literal' && typeof first.value === 'string') return first.value;
  if (first && first.type === 'TemplateLiteral' && first.expressions.length === 0) return first.quasis[0]?.value.cooked ?? '';
  return null;
}

function ownName(node, source) {
  if (node.type === 'FunctionDeclaration' && node.id) return node.id.name;
  const parent = node.parent;
  if (!parent) return null;
  if (parent.type === 'VariableDeclarator' && parent.id.type === 'Identifier') return parent.id.name;
  if (parent.type === 'MethodDefinition' || parent.type === 'PropertyDefinition') {
    const owner = parent.parent?.parent;
    const className = owner && (owner.type === 'ClassDeclaration' || owner.type === 'ClassExpression') && owner.id ? owner.id.name : '(class)';
    return `${className}.${keyName(parent.key) ?? '(computed)'}`;
  }
  if (parent.type === 'Property') return keyName(parent.key);
  if (parent.type === 'CallExpression' && parent.arguments.includes(node)) {
    const title = firstStringArgument(parent);
    return title === null ? `${calleeText(parent.callee, source)}(…)` : `${calleeText(parent.callee, source)}(${title})`;
  }
  return null;
}

const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);

function nameOf(node, source) {
  const own = ownName(node, source);
  if (own !== null) return own;
  for (let ancestor = node.parent; ancestor; ancestor = ancestor.parent) {
    if (FUNCTION_TYPES.has(ancestor.type)) return `${nameOf(ancestor, source)} > (anonymous)`;
  }
  return '(anonymous)';
}

export default {
  meta: {
    type: 'suggestion',
    docs: { description: 'Functions of at most `max` lines, but for the listed offenders, a list that may only shrink.' },
    schema: [{ type: 'object', properties: { max: { type: 'integer' }, offenders: { type: 'string' } }, additionalProperties: false }],
    messages: {
      tooLong: '{{name}} has {{lines}} lines (at most {{max}}): split it, by job.',
      stale: '{{name}} is listed in {{file}} as longer than {{max}} lines, but it is not (any more): remove it from the list.',
    },
  },
  create(context) {
    const { max = 70, offenders: offendersFile = 'eslint-rules/long-functions.json' } = context.options[0] ?? {};
    const root = context.cwd;
    const relative = path.relative(root, context.filename).split(path.sep).join('/');
    const listed = new Set(offendersFrom(path.resolve(root, offendersFile))[relative] ?? []);
    const seenLong = new Set();
    const source = context.sourceCode;
    function check(node) {
      const lines = node.loc.end.line - node.loc.start.line + 1;
      if (lines <= max) return;
      const name = nameOf(node, source);
      seenLong.add(name);
      if (!listed.has(name)) context.report({ node, messageId: 'tooLong', data: { name, lines: String(lines), max: String(max) } });
    }
    return {
      FunctionDeclaration: check,
      FunctionExpression: check,
      ArrowFunctionExpression: check,
      'Program:exit'(program) {
        for (const name of listed) {
          if (!seenLong.has(name)) context.report({ node: program, messageId: 'stale', data: { name, file: offendersFile, max: String(max) } });
        }
      },
    };
  },
};
