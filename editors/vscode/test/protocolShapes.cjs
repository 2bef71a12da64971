// Prints what src/protocol.ts declares, as JSON, for tests/test_vscode_protocol.py to compare
// with `tiller schema`. Read with the TypeScript compiler's type checker, so intersections,
// `extends` and unions are resolved as TypeScript itself resolves them:
//   {"types": {Name: Shape}, "errorCodes": {Name: code}}
// where Shape is {"literals": [...]} for a union of string literals, {"fields": {...}} for an
// object type, or {"union": [Shape, ...]} for a union of object types. A field is
// {"optional": bool, "literals": [...] | null}.
'use strict';

const path = require('node:path');
const ts = require('typescript');

const file = path.join(__dirname, '..', 'src', 'protocol.ts');
const program = ts.createProgram([file], { strict: true, target: ts.ScriptTarget.ES2022, types: [] });
const checker = program.getTypeChecker();
const source = program.getSourceFile(file);

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

const types = {};
const errorCodes = {};
for (const symbol of checker.getExportsOfModule(checker.getSymbolAtLocation(source))) {
  const declaration = symbol.declarations[0];
  if (ts.isInterfaceDeclaration(declaration) || ts.isTypeAliasDeclaration(declaration)) {
    types[symbol.name] = shape(checker.getDeclaredTypeOfSymbol(symbol));
  } else if (symbol.name === 'ErrorCode') {
    for (const property of checker.getPropertiesOfType(checker.getTypeOfSymbol(symbol))) {
      errorCodes[property.name] = checker.getTypeOfSymbol(property).value;
    }
  }
}
process.stdout.write(JSON.stringify({ types, errorCodes }, null, 1) + '\n');
