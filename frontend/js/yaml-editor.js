// The config page's YAML editor: CodeMirror 6 with line numbers, YAML highlighting and the
// draft's problems marked at their lines. Bundled by frontend/pack.mjs (esbuild) into one
// script the dashboard serves itself and loads only on the config page; the wasm drives it
// through `window.berthYamlEditor` (app/src/ui/editor/code.rs).
import { EditorState } from '@codemirror/state';
import { EditorView, keymap, lineNumbers, highlightActiveLine, highlightActiveLineGutter, drawSelection } from '@codemirror/view';
import { defaultKeymap, history, historyKeymap, indentWithTab } from '@codemirror/commands';
import { syntaxHighlighting, defaultHighlightStyle, indentOnInput, syntaxTree, ensureSyntaxTree } from '@codemirror/language';
import { yaml } from '@codemirror/lang-yaml';
import { setDiagnostics, lintGutter } from '@codemirror/lint';

/** The text of `node` in `state`, without quotes. */
function text(state, node) {
  return state.doc.sliceString(node.from, node.to).replace(/^["']|["']$/g, '');
}

/** The children of `node` named one of `names`. */
function children(node, names) {
  const out = [];
  for (let c = node.firstChild; c; c = c.nextSibling) if (names.includes(c.name)) out.push(c);
  return out;
}

/** The mapping or sequence a pair's or item's value is, looking through wrappers. */
function collection(node) {
  for (let c = node?.firstChild; c; c = c.nextSibling) {
    if (/Mapping|Sequence/.test(c.name)) return c;
    const inner = collection(c);
    if (inner) return inner;
  }
  return null;
}

/**
 * The node a validator path such as `resource_queues[1].flavors[0].name` names in the YAML
 * syntax tree: the deepest part of it that exists, so a missing field marks its parent.
 */
function locate(state, path) {
  const steps = path.match(/[^.[\]]+|\[\d+\]/g) || [];
  // CodeMirror parses in the background: right after a whole new text, the tree may stop
  // short of the path, and the mark would land on a parent. Parse to the end first.
  let node = (ensureSyntaxTree(state, state.doc.length, 500) || syntaxTree(state)).topNode;
  let found = null;
  let value = collection(node);
  for (const step of steps) {
    if (!value) break;
    let next = null;
    if (step.startsWith('[')) {
      next = children(value, ['Item'])[Number(step.slice(1, -1))] || null;
    } else {
      next = children(value, ['Pair']).find((p) => {
        const key = children(p, ['Key'])[0];
        return key && text(state, key) === step;
      }) || null;
    }
    if (!next) break;
    found = next;
    value = collection(next);
  }
  return found;
}

/** Where a problem starts: its own line and column, else where its path is, else nowhere. */
function startOf(state, p) {
  if (p.line) {
    const line = state.doc.line(Math.min(p.line, state.doc.lines));
    return p.column ? Math.min(line.from + p.column - 1, line.to) : line.from;
  }
  if (!p.path) return null;
  return locate(state, p.path)?.from ?? null;
}

/** Diagnostics for `problems` ({severity, path, message, line, column}), each to its line's end. */
function diagnostics(state, problems) {
  const out = [];
  for (const p of problems) {
    const from = startOf(state, p);
    if (from === null) continue;
    const to = Math.max(state.doc.lineAt(from).to, from);
    out.push({ from, to, severity: p.severity === 'error' ? 'error' : 'warning', message: p.message });
  }
  return out;
}

/**
 * Replaces `textarea` with an editor of its text; `onChange(text)` is called on each edit.
 * The textarea stays in the document (hidden), with the editor's text.
 */
function attach(textarea, onChange) {
  let quiet = false;
  const view = new EditorView({
    parent: textarea.parentNode,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        lineNumbers(), highlightActiveLineGutter(), highlightActiveLine(), drawSelection(), history(), indentOnInput(),
        yaml(), syntaxHighlighting(defaultHighlightStyle), lintGutter(),
        keymap.of([...defaultKeymap, ...historyKeymap, indentWithTab]),
        EditorView.contentAttributes.of({ 'aria-label': textarea.getAttribute('aria-label') || 'Draft config (YAML or JSON)', 'aria-describedby': textarea.getAttribute('aria-describedby') || '' }),
        EditorView.updateListener.of((u) => {
          // The tree grew (a background parse finished): find the problems' lines again.
          if (problems.length && syntaxTree(u.startState) !== syntaxTree(u.state)) queueMicrotask(mark);
          if (!u.docChanged || quiet) return;
          textarea.value = u.state.doc.toString();
          onChange(textarea.value);
        }),
      ],
    }),
  });
  textarea.parentNode.insertBefore(view.dom, textarea.nextSibling);
  textarea.hidden = true;
  let problems = [];
  const mark = () => view.dispatch(setDiagnostics(view.state, diagnostics(view.state, problems)));
  return {
    /** Shows `value` unless it is already the text (an edit from outside: upload, reset). */
    setText(value) {
      if (value === view.state.doc.toString()) return;
      quiet = true;
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: value } });
      quiet = false;
      textarea.value = value;
      mark();
    },
    /** Marks `list` (the draft's problems) at their lines. */
    setProblems(list) {
      problems = list;
      mark();
    },
    focus() {
      view.focus();
    },
    destroy() {
      view.destroy();
      textarea.hidden = false;
    },
  };
}

window.berthYamlEditor = { attach };
