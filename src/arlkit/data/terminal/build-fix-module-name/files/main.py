import helpers

print(helpers.double(21))
