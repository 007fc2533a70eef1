#!/usr/bin/perl

# Issue 25: a capability refusal is remembered per (provider, model,
# feature), like the tool limit and not as a failure of the connection:
# for tool_limit.backoff_ms, later requests that use the feature (tools,
# an assistant prefill, images, a named parameter) skip that target and
# go to the next one; requests that do not use it still go to it.  When
# only such targets are left they are asked anyway (their refusal is the
# answer, not a 503).  2 workers: the memory is shared.

use strict;
use warnings;

use FindBin;
use lib "$FindBin::Bin/lib";
use Test::More;
use JSON::PP;
use OmniTest;

my $t = OmniTest->new(workers => 2);
my $m = $t->mock('p');

my $TOKEN = 'capmemory-0123456789-abcdef';
$ENV{OMNI_TEST_API_TOKEN} = $TOKEN;

sub uri {
    my ($s) = @_;
    $s =~ s/([^A-Za-z0-9_.~-])/sprintf('%%%02X', ord $1)/ge;
    return $s;
}

# refusals in the providers' documented shapes
my %bodies = (
    tools   => '{"error":{"message":"No endpoints found that support tool '
               . 'use.","code":404}}',
    prefill => '{"type":"error","error":{"type":"invalid_request_error",'
               . '"message":"This model does not support assistant message '
               . 'prefill. The conversation must end with a user message."}}',
    param   => '{"error":{"message":"Unsupported parameter: \'temperature\' '
               . 'is not supported with this model.","type":"invalid_request_'
               . 'error","param":"temperature","code":"unsupported_parameter"}}',
    images  => '{"error":{"message":"This model does not support image '
               . 'input.","type":"invalid_request_error","code":null}}',
);

my %keys = (
    tools   => 'status=404,body=' . uri($bodies{tools}),
    prefill => 'status=400,body=' . uri($bodies{prefill}),
    param   => 'status=400,body=' . uri($bodies{param}),
    images  => 'status=400,body=' . uri($bodies{images}),
    ok      => 'ok',
);

my $providers = $t->providers_per_key('p', \%keys);

my $combos = join "\n", map { "    omniroute_combo c-$_ $_/m ok/m;" }
             qw(tools prefill param images);

$t->config(<<"EOF", main => "env OMNI_TEST_API_TOKEN;");
    omniroute_zone zone=omniroute:1m;

$providers

$combos

    omniroute_api_token env=OMNI_TEST_API_TOKEN;

    server {
        listen 127.0.0.1:%%PORT_gw%% reuseport;

        location /v1/ {
            omniroute_pass;
            omniroute_attempt_trail on;
        }

        location /_omniroute {
            internal;
            include %%PARAMS%%;
        }

        location /api/ {
            omniroute_api;
        }
    }
EOF

$t->run($t->port('gw'));
my $gw = $t->port('gw');

sub asked {
    my ($k) = @_;
    return scalar grep { $_->{path} =~ m{^/\Q$k\E/} } @{$m->requests};
}

my $user = [{ role => 'user', content => 'hi' }];
my $tools = [{ type => 'function',
               function => { name => 'list_files',
                             parameters => { type => 'object' } } }];

# a request of each feature, with it
my %with = (
    tools   => { messages => $user, tools => $tools },
    prefill => { messages => [@$user, { role => 'assistant',
                                        content => 'Sure,' }] },
    param   => { messages => $user, temperature => 0.2 },
    images  => { messages => [{ role => 'user', content => [
                     { type => 'text', text => 'what is this?' },
                     { type => 'image_url',
                       image_url => { url => 'data:image/png;base64,AAAA' } },
                 ] }] },
);

for my $k (qw(tools prefill param images)) {
    my $ask = sub {
        my ($body) = @_;
        return $t->post($gw, '/v1/chat/completions',
                        { model => "c-$k", %$body });
    };

    # 1. the first request finds out and falls over
    my $r = $ask->($with{$k});
    is($r->{status}, 200, "$k: the refusal falls over");
    like($r->{headers}{'x-omniroute-trail'} // '', qr/^\Q$k\E;40[04];/,
         "$k: the first request asked the refusing target");
    is(asked($k), 1, "$k: once");

    # 2. later requests using the feature skip it, on either worker
    for my $i (1 .. 4) {
        $r = $ask->($with{$k});
        is($r->{status}, 200, "$k: request $i with the feature: 200");
        like($r->{headers}{'x-omniroute-trail'} // '', qr/^ok;200;/,
             "$k: request $i went to the next target at once")
            or diag($r->{headers}{'x-omniroute-trail'});
    }
    is(asked($k), 1, "issue 25: $k: remembered, the target was not asked "
                     . 'again for it');

    # 3. a request without the feature still goes to it
    $r = $ask->({ messages => $user });
    is(asked($k), 2, "$k: a request without the feature still goes to it");

    my $c = $t->connection_state($gw, $k, $TOKEN) // {};
    ok(!$c->{retry_after_ms}, "$k: the connection is not cooled")
        or diag(explain $c);
}

# 4. only a target that refused the feature is left: it is asked anyway,
#    its refusal is the answer
my $before = asked('tools');
my $r = $t->post($gw, '/v1/chat/completions',
                 { model => 'tools/m', messages => $user, tools => $tools });
is($r->{status}, 404, 'issue 25: the only target: its refusal, not a 503')
    or diag("$r->{status} $r->{body}");
like($r->{body}, qr/support tool use/, '... the provider\'s own words');
is(asked('tools'), $before + 1, '... it was asked');

like($t->error_log, qr/"tools\/m"[ ]does[ ]not[ ]support[ ]tools:[ ]requests
                       [ ]using[ ]it[ ]skip[ ]it[ ]for[ ]\d+[ ]s/x,
     'the memory is logged');

$t->done;
done_testing;
