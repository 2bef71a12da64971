// Prints what src/protocol.ts declares, as JSON, for tests/editors/test_vscode_protocol.py to
// compare with `tiller schema`. Read with the TypeScript compiler's type checker, so aliases,
// intersections and unions are resolved as TypeScript itself resolves them:
//   {"types": {Name: Shape}, "maps": {Name: {method: {params?, result?}}},
//    "lists": {Name: [value, ...]}, "errorCodes": {Name: code}}
// where Shape is {"literals": [...]} for a union of string literals, {"fields": {...}} for an
// object type, or {"union": [Shape, ...]} for a union of object types; a field is
// {"optional": bool, "literals": [...] | null}. `maps` are the method maps (`Methods`...), each
// entry naming the types of its params and result; `lists` the constant word lists.
'use strict';

const path = require('node:path');
const ts = require('typescript');

const file = path.join(__dirname, '..', 'src', 'protocol.ts');
const program = ts.createProgram([file], { strict: true, target: ts.ScriptTarget.ES2022, types: [] });
const checker = program.getTypeChecker();
const source = program.getSourceFile(file);
const MAPS = new Set(['Methods', 'Notifications', 'ServerRequests', 'ServerNotifications']);

function literals(type) {
  const parts = (type.isUnion() ? type.types : [type]).filter(
    (part) => !(part.flags & ts.TypeFlags.Undefined),
  );
  if (parts.length === 0 || !parts.every((part) => part.isStringLiteral())) {
    return null;
  }
  return parts.map((part) => part.value).sort();
}

function fields(type) {
  const result = {};
  for (const property of checker.getPropertiesOfType(type)) {
    result[property.name] = {
      optional: (property.flags & ts.SymbolFlags.Optional) !== 0,
      literals: literals(checker.getTypeOfSymbolAtLocation(property, source)),
    };
  }
  return result;
}

function shape(type) {
  const values = literals(type);
  if (values !== null) {
    return { literals: values };
  }
  if (type.isUnion()) {
    return { union: type.types.map((member) => ({ fields: fields(member) })) };
  }
  return { fields: fields(type) };
}

function map(type) {
  const result = {};
  for (const method of checker.getPropertiesOfType(type)) {
    const entry = {};
    for (const part of checker.getPropertiesOfType(checker.getTypeOfSymbolAtLocation(method, source))) {
      entry[part.name] = checker.typeToString(checker.getTypeOfSymbolAtLocation(part, source));
    }
    result[method.name] = entry;
  }
  return result;
}

const out = { types: {}, maps: {}, lists: {}, errorCodes: {} };
for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(source))) {
  const declarations = symbol.declarations ?? [];
  const typeDeclaration = declarations.find(
    (d) => ts.isInterfaceDeclaration(d) || ts.isTypeAliasDeclaration(d),
  );
  const value = declarations.find((d) => ts.isVariableDeclaration(d));
  if (symbol.name === 'ErrorCode') {
    for (const property of checker.getPropertiesOfType(checker.getTypeOfSymbol(symbol))) {
      out.errorCodes[property.name] = checker.getTypeOfSymbol(property).value;
    }
  } else if (MAPS.has(symbol.name)) {
    out.maps[symbol.name] = map(checker.getDeclaredTypeOfSymbol(symbol));
  } else if (typeDeclaration) {
    out.types[symbol.name] = shape(checker.getDeclaredTypeOfSymbol(symbol));
    if (value) {
      const list = checker.getTypeOfSymbol(symbol);
      out.lists[symbol.name] = checker.getTypeArguments(list).map((part) => part.value);
    }
  } else {
    out.types[symbol.name] = { value: true };
  }
}
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
