def greet(name):
    return 'Hello ' + name

print(greet('world'))
