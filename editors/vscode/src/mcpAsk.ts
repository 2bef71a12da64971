// An MCP server's questions (`client/elicit`) and sign-in pages (`client/openUrl`), asked with
// VS Code's own quick picks and input boxes. Form mode: Fill in / Decline first, then each
// field in turn (required ones first, then by name): booleans and enums are quick picks,
// numbers and text input boxes (a field's default prefilled, a bad number refused in place, an
// optional field left empty is left out). Dismissing any prompt cancels. URL mode: Open /
// Decline, Open opens the page with `env.openExternal`. The UI is passed in (`AskUi`), so
// the logic is tested without VS Code.

import type { ElicitParams, ElicitResult } from './protocol';

export interface AskUi {
  pick(items: string[], title: string): Promise<string | undefined>;
  input(title: string, value: string | undefined, check: (text: string) => string | undefined): Promise<string | undefined>;
  open(url: string): Promise<boolean>;
}

interface FieldSpec {
  type?: string;
  title?: string;
  description?: string;
  default?: unknown;
  enum?: string[];
  enumNames?: string[];
  oneOf?: { const: string; title?: string }[];
  anyOf?: { const: string; title?: string }[];
  items?: FieldSpec;
}

type Value = string | number | boolean | string[];

/** The fields of a form schema in asking order: required ones first, then by name. */
export function formFields(schema: Record<string, unknown> | undefined): { name: string; spec: FieldSpec; required: boolean }[] {
  const properties = (schema?.properties ?? {}) as Record<string, FieldSpec>;
  const required = new Set(Array.isArray(schema?.required) ? (schema.required as string[]) : []);
  return Object.keys(properties)
    .sort((a, b) => Number(required.has(b)) - Number(required.has(a)) || (a < b ? -1 : a > b ? 1 : 0))
    .map((name) => ({ name, spec: properties[name] ?? {}, required: required.has(name) }));
}

function choices(spec: FieldSpec): { value: string; shown: string }[] | undefined {
  const items = spec.type === 'array' ? spec.items : spec;
  if (!items) {
    return undefined;
  }
  if (items.enum) {
    return items.enum.map((value, i) => ({ value, shown: spec.enumNames?.[i] ?? value }));
  }
  const options = items.oneOf ?? items.anyOf;
  return options?.map((option) => ({ value: option.const, shown: option.title ?? option.const }));
}

async function askField(ui: AskUi, name: string, spec: FieldSpec, required: boolean): Promise<Value | '' | undefined> {
  const title = `${spec.title ?? name}${spec.description ? ` (${spec.description})` : ''}${required ? ' *' : ''}`;
  if (spec.type === 'boolean') {
    const choice = await ui.pick(['true', 'false'], title);
    return choice === undefined ? undefined : choice === 'true';
  }
  const options = choices(spec);
  if (options && spec.type !== 'array') {
    const choice = await ui.pick(options.map((o) => o.shown), title);
    return choice === undefined ? undefined : options.find((o) => o.shown === choice)?.value;
  }
  const numeric = spec.type === 'number' || spec.type === 'integer';
  const fallback = Array.isArray(spec.default) ? spec.default.join(', ') : spec.default;
  const hint = options ? ` [${options.map((o) => o.value).join(', ')}]` : '';
  const text = await ui.input(title + hint, fallback === undefined ? undefined : String(fallback), (value) => {
    if (!numeric || (value === '' && !required)) {
      return undefined;
    }
    const number = Number(value);
    if (value.trim() === '' || Number.isNaN(number) || (spec.type === 'integer' && !Number.isInteger(number))) {
      return spec.type === 'integer' ? 'an integer' : 'a number';
    }
    return undefined;
  });
  if (text === undefined || text === '') {
    return text;
  }
  if (numeric) {
    return Number(text);
  }
  return spec.type === 'array' ? text.split(/\s*,\s*/).filter((item) => item !== '') : text;
}

/** Ask the user an MCP server's question (see the module comment). */
export async function elicit(ui: AskUi, params: ElicitParams): Promise<ElicitResult> {
  const question = `${params.server} asks: ${params.message}`;
  if (params.mode === 'url') {
    const choice = await ui.pick(['Open', 'Decline'], `${question} (${params.url ?? ''})`);
    if (choice === 'Open') {
      await ui.open(params.url ?? '');
      return { action: 'accept' };
    }
    return { action: choice === undefined ? 'cancel' : 'decline' };
  }
  const choice = await ui.pick(['Fill in', 'Decline'], question);
  if (choice !== 'Fill in') {
    return { action: choice === undefined ? 'cancel' : 'decline' };
  }
  const content: Record<string, Value> = {};
  for (const field of formFields(params.requestedSchema)) {
    const value = await askField(ui, field.name, field.spec, field.required);
    if (value === undefined) {
      return { action: 'cancel' };
    }
    if (value !== '') {
      content[field.name] = value;
    }
  }
  return { action: 'accept', content };
}
